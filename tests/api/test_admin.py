"""The Django admin: every page renders for staff, and a case's history is read-only."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from evals_app.models import CaseVersion, Check, Consultation

from .factories import VALIDATOR_SOURCE, make_case, make_definition


@pytest.fixture
def admin_client_of(client, db):
    root = User.objects.create_superuser("root", "root@example.com", "secret-password")
    client.force_login(root)
    return client


@pytest.mark.parametrize(
    "model", ["organization", "suite", "case", "caseversion", "variant", "batch", "run", "trial"]
)
def test_it_renders_each_list_and_object_page_for_a_superuser(model, admin_client_of, acme_world):
    changelist = admin_client_of.get(f"/admin/evals_app/{model}/")
    assert changelist.status_code == 200
    first_link = changelist.context["cl"].result_list[0].pk

    page = admin_client_of.get(f"/admin/evals_app/{model}/{first_link}/change/")

    assert page.status_code == 200


def test_it_searches_and_filters_cases(admin_client_of, acme_world):
    found = admin_client_of.get("/admin/evals_app/case/?q=login")
    filtered = admin_client_of.get(
        f"/admin/evals_app/case/?suite__id__exact={acme_world.cases[1].suite_id}"
    )

    assert [case.slug for case in found.context["cl"].result_list] == ["login-form"]
    assert {case.slug for case in filtered.context["cl"].result_list} == {
        "login-form",
        "search-box",
    }


def test_it_shows_a_cases_versions_read_only_with_what_changed(admin_client_of, acme_world):
    health = acme_world.cases[0]

    page = admin_client_of.get(f"/admin/evals_app/case/{health.id}/change/")

    html = page.content.decode()
    assert "first version" in html
    assert "limits.timeout_ms: 900000 -&gt; 1800000" in html
    assert "def has_health_route(workspace):" in html
    # Read-only: no form fields for the versions, and no adding, changing or deleting one.
    assert 'name="versions-0-number"' not in html
    assert 'name="versions-0-DELETE"' not in html
    versions = next(
        inline
        for inline in page.context["inline_admin_formsets"]
        if inline.opts.model is CaseVersion
    )
    assert not versions.has_add_permission
    assert not versions.has_change_permission
    assert not versions.has_delete_permission


def test_it_escapes_captured_source_in_the_admin(admin_client_of, acme):
    evil_source = VALIDATOR_SOURCE.replace(
        '"""The app answers /health."""', '"""<script>alert(1)</script>"""'
    )
    case = make_case(acme, "evil", definitions=[make_definition("api", "evil")])
    CaseVersion.objects.filter(case=case).update(sources={"evals/api.eval.py": evil_source})

    html = admin_client_of.get(f"/admin/evals_app/case/{case.id}/change/").content.decode()

    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_it_shows_a_version_with_its_source_diff_and_never_changes_it(admin_client_of, acme_world):
    second = acme_world.cases[0].versions.get(number=2)
    url = f"/admin/evals_app/caseversion/{second.id}/change/"

    page = admin_client_of.get(url)
    posted = admin_client_of.post(url, {"number": 9})

    assert page.status_code == 200
    assert "limits.timeout_ms: 900000 -&gt; 1800000" in page.content.decode()
    assert "no source change" in page.content.decode()
    assert posted.status_code == 403
    assert admin_client_of.get("/admin/evals_app/caseversion/add/").status_code == 403
    assert (
        admin_client_of.post(
            f"/admin/evals_app/caseversion/{second.id}/delete/", {"post": "yes"}
        ).status_code
        == 403
    )
    second.refresh_from_db()
    assert second.number == 2


def test_it_shows_a_trials_checks_and_consultations(admin_client_of, acme_world):
    trial = acme_world.runs[0].trials.get(index=1)
    Consultation.objects.create(
        trial=trial, kind="judge", check_index=1, verdict="fail", reason="no route added"
    )

    html = admin_client_of.get(f"/admin/evals_app/trial/{trial.id}/change/").content.decode()

    assert "has_health_route" in html
    assert "no /health route" in html
    assert "no route added" in html
    assert Check.objects.filter(trial=trial).count() == 2


def test_it_sends_a_non_staff_member_to_the_admin_login(client, alice):
    client.force_login(alice)

    response = client.get("/admin/evals_app/case/")

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
