"""Who may read what through the API: members see their organization's objects, anyone else
gets 404, and nobody signed out gets anything."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from evals_app.models import CaseVersion, Run, Suite, Trial

LIST_ENDPOINTS = ["suites", "cases", "case-versions", "variants", "batches", "runs", "trials"]


def acme_ids(world, endpoint: str) -> set[int]:
    org = world.org
    rows = {
        "suites": Suite.objects.filter(organization=org),
        "cases": org.cases.all(),
        "case-versions": CaseVersion.objects.filter(case__organization=org),
        "variants": org.variants.all(),
        "batches": org.batches.all(),
        "runs": Run.objects.filter(batch__organization=org),
        "trials": Trial.objects.filter(run__batch__organization=org),
    }[endpoint]
    return set(rows.values_list("id", flat=True))


def listed_ids(response) -> set[int]:
    assert response.status_code == 200, response.content
    return {row["id"] for row in response.json()["results"]}


def acme_object_urls(world) -> list[str]:
    health = world.cases[0]
    run = world.runs[0]
    trial = run.trials.first()
    return [
        f"/api/suites/{health.suite_id}/",
        f"/api/cases/{health.id}/",
        f"/api/case-versions/{health.latest_version().id}/",
        f"/api/variants/{world.variants[0].id}/",
        f"/api/batches/{world.batch.id}/",
        f"/api/runs/{run.id}/",
        f"/api/trials/{trial.id}/",
        f"/api/trials/{trial.id}/events/",
    ]


@pytest.mark.parametrize("endpoint", LIST_ENDPOINTS)
def test_it_lists_only_the_members_organization(endpoint, api_as, alice, acme_world, globex_world):
    ids = listed_ids(api_as(alice).get(f"/api/{endpoint}/"))

    assert ids == acme_ids(acme_world, endpoint)


@pytest.mark.parametrize("endpoint", LIST_ENDPOINTS)
def test_it_hides_another_organizations_objects_from_lists(
    endpoint, api_as, charlie, acme_world, globex_world
):
    ids = listed_ids(api_as(charlie).get(f"/api/{endpoint}/"))

    assert ids
    assert not ids & acme_ids(acme_world, endpoint)


def test_it_shows_each_object_to_a_member(api_as, bob, acme_world):
    client = api_as(bob)

    for url in acme_object_urls(acme_world):
        assert client.get(url).status_code == 200, url


def test_it_answers_404_for_each_object_of_another_organization(api_as, charlie, acme_world):
    client = api_as(charlie)

    for url in acme_object_urls(acme_world):
        assert client.get(url).status_code == 404, url


def test_it_answers_404_to_reruns_of_another_organizations_objects(api_as, charlie, acme_world):
    client = api_as(charlie)
    batch, run = acme_world.batch, acme_world.runs[0]

    assert (
        client.post(f"/api/batches/{batch.id}/rerun/", {"scope": "all"}, format="json").status_code
        == 404
    )
    assert client.post(f"/api/runs/{run.id}/rerun/").status_code == 404
    response = client.post(
        f"/api/batches/{batch.id}/rerun-case/", {"case": "health-route"}, format="json"
    )
    assert response.status_code == 404
    assert batch.reruns.count() == 0


def test_it_answers_404_for_an_id_that_is_not_a_number(api_as, alice, acme_world):
    assert api_as(alice).get("/api/batches/latest/").status_code == 404


@pytest.mark.parametrize("endpoint", [*LIST_ENDPOINTS, "schema"])
def test_it_refuses_anyone_signed_out(endpoint, acme_world):
    response = APIClient().get(f"/api/{endpoint}/", HTTP_ACCEPT="application/json")

    assert response.status_code == 403
    assert response.json() == {"detail": "Authentication credentials were not provided."}


def test_it_refuses_an_unknown_token(acme_world):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")

    response = client.get("/api/batches/")

    # Session auth comes first in settings, and it names no WWW-Authenticate scheme: 403, not 401.
    assert response.status_code == 403
    assert response.json() == {"detail": "Invalid token."}


def test_it_accepts_the_token_createtoken_prints(alice, acme_world, capsys):
    call_command("createtoken", "alice")
    token = capsys.readouterr().out.strip()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")

    assert listed_ids(client.get("/api/batches/")) == {acme_world.batch.id}


def test_it_prints_the_same_token_until_reset(alice, capsys):
    call_command("createtoken", "alice")
    first = capsys.readouterr().out.strip()
    call_command("createtoken", "alice")
    again = capsys.readouterr().out.strip()
    call_command("createtoken", "alice", "--reset")
    reset = capsys.readouterr().out.strip()

    assert first == again
    assert reset != first
    assert len(reset) == 40


def test_it_names_an_unknown_user_when_creating_a_token(db):
    with pytest.raises(CommandError, match="There is no user named 'nobody'"):
        call_command("createtoken", "nobody")


def test_it_refuses_a_rerun_post_without_csrf_token_in_a_browser_session(alice, acme_world):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(alice)

    response = client.post(f"/api/runs/{acme_world.runs[0].id}/rerun/")

    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert acme_world.batch.reruns.count() == 0
