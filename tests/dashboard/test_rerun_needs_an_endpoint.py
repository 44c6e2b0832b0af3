"""A rerun from the UI or the API meets the CLI's checks: a judged case on a server with no
model endpoint is refused with the CLI's sentence, and nothing is queued."""

from __future__ import annotations

import pytest
from factories import (
    make_batch,
    make_case,
    make_cast,
    make_definition,
    make_run,
    make_trial,
    make_variant,
    make_version,
)
from rest_framework.test import APIClient

from evals_app.models import Batch, Trial
from runner.llm import endpoints

pytestmark = pytest.mark.django_db

SENTENCE = "uses a judge, which needs a model endpoint on the server: set PROCTOR_LLM_BASE_URL"


@pytest.fixture
def no_endpoint(monkeypatch):
    for name in ("BASE_URL", "API_KEY", "MODEL", "COMMAND"):
        monkeypatch.delenv(f"PROCTOR_LLM_{name}", raising=False)
    monkeypatch.setattr(endpoints, "_project_config", None)


@pytest.fixture
def queued(monkeypatch) -> list[int]:
    ids: list[int] = []
    monkeypatch.setattr("runner.batches.reruns.enqueue", lambda trial_ids: ids.extend(trial_ids))
    return ids


@pytest.fixture
def cast():
    return make_cast()


@pytest.fixture
def judged_run(cast):
    """One failed trial of a case graded by a model judge."""
    checks = [{"kind": "judge", "name": "explains the fix", "rubric": "Explains the fix."}]
    case = make_case(cast.acme, "explains-the-fix")
    version = make_version(case, definition=make_definition("api", case.slug, checks=checks))
    run = make_run(make_batch(cast.acme), version, make_variant(cast.acme, "claude"))
    make_trial(run, status=Trial.Status.FAILED)
    make_trial(run, status=Trial.Status.ERRORED, index=1)
    return run


def test_the_rerun_button_is_refused_with_the_clis_sentence(
    client, cast, judged_run, no_endpoint, queued, django_capture_on_commit_callbacks
):
    client.force_login(cast.alice)
    batches_before = Batch.objects.count()
    run_page = f"/runs/{judged_run.pk}/"

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/runs/{judged_run.pk}/rerun/", HTTP_REFERER=run_page)

    assert response.status_code == 302 and response["Location"] == run_page
    shown = client.get(run_page).content.decode()
    assert "Not rerun:" in shown and SENTENCE in shown
    assert "case explains-the-fix" in shown
    assert Batch.objects.count() == batches_before
    assert queued == []


@pytest.mark.parametrize("button", ["rerun", "rerun-failed", "rerun-errored", "case", "trial"])
def test_every_batch_rerun_button_applies_the_check(
    client, cast, judged_run, no_endpoint, queued, button
):
    client.force_login(cast.alice)
    batch = judged_run.batch
    url = {
        "rerun": f"/batches/{batch.pk}/rerun/",
        "rerun-failed": f"/batches/{batch.pk}/rerun-failed/",
        "rerun-errored": f"/batches/{batch.pk}/rerun-errored/",
        "case": f"/batches/{batch.pk}/cases/{judged_run.case_version.case_id}/rerun/",
        "trial": f"/trials/{judged_run.trials.first().pk}/rerun/",
    }[button]

    response = client.post(url, follow=True)

    assert SENTENCE in response.content.decode()
    assert Batch.objects.count() == 1 and queued == []


def test_the_api_refuses_the_rerun_with_the_same_sentence(cast, judged_run, no_endpoint, queued):
    api = APIClient()
    api.force_authenticate(cast.alice)

    response = api.post(f"/api/runs/{judged_run.pk}/rerun/")

    assert response.status_code == 400
    [problem] = response.json()["problems"]
    assert SENTENCE in problem and "explains-the-fix" in problem
    batch_response = api.post(
        f"/api/batches/{judged_run.batch_id}/rerun/", {"scope": "all"}, format="json"
    )
    assert batch_response.status_code == 400
    assert Batch.objects.count() == 1 and queued == []


def test_with_an_endpoint_the_rerun_goes_ahead(
    client, cast, judged_run, monkeypatch, queued, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(endpoints, "_project_config", None)
    monkeypatch.setenv("PROCTOR_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("PROCTOR_LLM_MODEL", "judge-model")
    client.force_login(cast.alice)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/runs/{judged_run.pk}/rerun/")

    new = Batch.objects.order_by("-id").first()
    assert response["Location"] == f"/batches/{new.pk}/" and new.parent_id == judged_run.batch_id
    assert len(queued) == 2  # the run's two trials, again
