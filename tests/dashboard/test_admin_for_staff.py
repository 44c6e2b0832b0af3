"""The admin for a staff member made with `proctor createuser --staff`: their organization's
records, readable names, nothing of another organization."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from evals_app.models import Organization
from tests.dashboard.factories import (
    make_batch,
    make_case,
    make_run,
    make_variant,
    make_version,
)

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-password"


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def records():
    """acme's batch (alice's organization) and globex's (someone else's)."""
    call_command("createuser", "alice", org="acme", password=PASSWORD, staff=True)
    made = {}
    for org_slug in ("acme", "globex"):
        org = Organization.objects.get_or_create(
            slug=org_slug, defaults={"name": org_slug.title()}
        )[0]
        case = make_case(org, f"{org_slug}-health-route")
        version = make_version(case)
        variant = make_variant(org, f"{org_slug}-agent")
        batch = make_batch(org, label=f"{org_slug} nightly")
        make_run(batch, version, variant)
        made[org_slug] = batch
    return made


def sign_in_through_the_admin(client) -> None:
    response = client.post(
        "/admin/login/?next=/admin/",
        {"username": "alice", "password": PASSWORD, "next": "/admin/"},
    )
    assert response.status_code == 302 and response.url == "/admin/", response.content[:500]


def test_a_staff_member_sees_their_organizations_models_with_readable_names(client, records):
    sign_in_through_the_admin(client)

    index = client.get("/admin/").content.decode()

    assert "You don’t have permission" not in index and "You don't have permission" not in index
    for name in ("Batches", "Cases", "Trials", "Runs", "Variants", "Suites", "Organizations"):
        assert f">{name}<" in index, name
    assert "Batchs" not in index


def test_a_staff_member_sees_only_their_organizations_rows(client, records):
    sign_in_through_the_admin(client)

    batches = client.get("/admin/evals_app/batch/").content.decode()
    assert "acme nightly" in batches
    assert "globex nightly" not in batches
    # The organization filter names only their own organization.
    assert "Globex" not in batches

    cases = client.get("/admin/evals_app/case/").content.decode()
    assert "acme-health-route" in cases and "globex-health-route" not in cases
    trials_page = client.get("/admin/evals_app/run/")
    assert trials_page.status_code == 200

    mine = client.get(f"/admin/evals_app/batch/{records['acme'].pk}/change/")
    assert mine.status_code == 200 and "acme nightly" in mine.content.decode()
    theirs = client.get(f"/admin/evals_app/batch/{records['globex'].pk}/change/", follow=True)
    assert "globex nightly" not in theirs.content.decode()
    assert "doesn’t exist" in theirs.content.decode()


def test_a_staff_member_reads_but_does_not_change_without_permissions(client, records):
    sign_in_through_the_admin(client)

    page = client.get(f"/admin/evals_app/batch/{records['acme'].pk}/change/").content.decode()
    assert 'name="_save"' not in page
    response = client.post(
        f"/admin/evals_app/batch/{records['acme'].pk}/change/", {"label": "renamed"}
    )
    assert response.status_code == 403
    records["acme"].refresh_from_db()
    assert records["acme"].label == "acme nightly"


def test_a_superuser_still_sees_every_organization(client, records, django_user_model):
    django_user_model.objects.create_superuser("root", password=PASSWORD)
    client.login(username="root", password=PASSWORD)

    batches = client.get("/admin/evals_app/batch/").content.decode()
    assert "acme nightly" in batches and "globex nightly" in batches
