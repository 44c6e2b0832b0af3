"""The API's OpenAPI schema and docs page, and reruns started through it."""

from __future__ import annotations

import pytest
from drf_spectacular.validation import validate_schema

from evals_app.models import Batch

from .factories import make_batch, make_case, make_variant


def test_it_serves_a_valid_openapi_schema(api_as, alice, acme_world):
    response = api_as(alice).get("/api/schema/?format=json")

    assert response.status_code == 200
    schema = response.json()
    validate_schema(schema)  # raises on a schema that breaks the OpenAPI 3 specification
    assert schema["openapi"].startswith("3.")
    assert {
        "/api/batches/{id}/rerun/",
        "/api/batches/{id}/rerun-case/",
        "/api/runs/{id}/rerun/",
        "/api/trials/{id}/events/",
        "/api/case-versions/{id}/",
    } <= set(schema["paths"])


def test_it_serves_the_docs_page_from_local_assets(api_as, alice):
    response = api_as(alice).get("/api/docs/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in page
    assert "cdn.jsdelivr.net" not in page
    # The init script (which names the schema) is its own file: no inline script (the CSP).
    script = api_as(alice).get("/api/docs/?script").content.decode()
    assert "/api/schema/" in script


def test_it_sends_a_signed_out_reader_of_the_docs_to_sign_in(client, db):
    response = client.get("/api/docs/")

    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=/api/docs/")


def test_it_names_a_case_that_did_not_run_in_the_batch(api_as, alice, acme_world):
    # search-box exists in acme but has no runs in the batch.
    response = api_as(alice).post(
        f"/api/batches/{acme_world.batch.id}/rerun-case/", {"case": "search-box"}, format="json"
    )

    assert response.status_code == 400
    assert response.json() == {
        "case": f"Batch {acme_world.batch.id} has no runs of case 'search-box'."
    }


def test_it_rejects_an_unknown_rerun_scope(api_as, alice, acme_world):
    response = api_as(alice).post(
        f"/api/batches/{acme_world.batch.id}/rerun/", {"scope": "some"}, format="json"
    )

    assert response.status_code == 400
    assert "scope" in response.json()
    assert acme_world.batch.reruns.count() == 0


def test_it_refuses_to_rerun_the_failures_of_a_batch_without_any(api_as, alice, acme, globex_world):
    clean = make_batch(
        acme, [make_case(acme, "clean")], [make_variant(acme, "solid")], statuses=["passed"]
    )

    response = api_as(alice).post(
        f"/api/batches/{clean.id}/rerun/", {"scope": "failed"}, format="json"
    )

    assert response.status_code == 400
    assert response.json() == {
        "scope": f"Batch {clean.id} has no failed, errored or timed-out trials to rerun."
    }
    assert clean.reruns.count() == 0


@pytest.fixture
def reruns():
    return pytest.importorskip(
        "runner.batches.reruns",
        reason="runner/batches/reruns.py (the lead's rerun functions) has not landed yet",
    )


def assert_created_rerun(response, source: Batch) -> Batch:
    assert response.status_code == 201, response.content
    body = response.json()
    new_batch = Batch.objects.get(pk=body["id"])
    assert new_batch.parent_id == source.id
    assert body["parent"] == source.id
    assert response["Location"].endswith(f"/api/batches/{new_batch.id}/")
    return new_batch


def test_it_reruns_a_whole_batch(reruns, api_as, alice, acme_world):
    response = api_as(alice).post(
        f"/api/batches/{acme_world.batch.id}/rerun/", {"scope": "all"}, format="json"
    )

    new_batch = assert_created_rerun(response, acme_world.batch)
    assert new_batch.runs.count() == 4
    assert response.json()["trial_counts"]["total"] == 12


def test_it_reruns_only_the_failed_trials_of_a_batch(reruns, api_as, alice, acme_world):
    response = api_as(alice).post(
        f"/api/batches/{acme_world.batch.id}/rerun/", {"scope": "failed"}, format="json"
    )

    assert_created_rerun(response, acme_world.batch)
    # Each run had one failed and one errored trial: two trials again per run.
    assert response.json()["trial_counts"]["total"] == 8


def test_it_reruns_only_the_errored_trials_of_a_batch(reruns, api_as, alice, acme_world):
    response = api_as(alice).post(
        f"/api/batches/{acme_world.batch.id}/rerun/", {"scope": "errored"}, format="json"
    )

    new_batch = assert_created_rerun(response, acme_world.batch)
    # Each run had one errored trial; its failed one is a result about the agent and stays.
    assert response.json()["trial_counts"]["total"] == 4
    assert new_batch.runs.count() == 4


def test_it_refuses_to_rerun_the_errors_of_a_batch_without_any(api_as, alice, acme, globex_world):
    clean = make_batch(
        acme, [make_case(acme, "shaky")], [make_variant(acme, "solid")], statuses=["failed"]
    )

    response = api_as(alice).post(
        f"/api/batches/{clean.id}/rerun/", {"scope": "errored"}, format="json"
    )

    assert response.status_code == 400
    assert response.json() == {"scope": f"Batch {clean.id} has no errored trials to rerun."}
    assert clean.reruns.count() == 0


def test_it_reruns_one_run(reruns, api_as, bob, acme_world):
    run = acme_world.runs[0]

    response = api_as(bob).post(f"/api/runs/{run.id}/rerun/")

    new_batch = assert_created_rerun(response, acme_world.batch)
    assert [(r.case_version_id, r.variant_id) for r in new_batch.runs.all()] == [
        (run.case_version_id, run.variant_id)
    ]
    assert new_batch.created_by.username == "bob"


def test_it_reruns_one_case_under_every_variant(reruns, api_as, alice, acme_world):
    response = api_as(alice).post(
        f"/api/batches/{acme_world.batch.id}/rerun-case/", {"case": "login-form"}, format="json"
    )

    new_batch = assert_created_rerun(response, acme_world.batch)
    assert {r.case_version.case.slug for r in new_batch.runs.all()} == {"login-form"}
    assert new_batch.runs.count() == 2
