"""Rerun buttons: a POST makes a new batch linked to its source and queues its trials."""

from __future__ import annotations

import pytest
from factories import make_batch_with_grid, make_cast

from evals_app.models import Batch, CaseVersion, Trial, Variant

pytestmark = pytest.mark.django_db

S = Trial.Status


@pytest.fixture
def queued(monkeypatch) -> list[int]:
    """Trial ids handed to the queue, instead of running them in this test's process."""
    ids: list[int] = []
    monkeypatch.setattr("runner.batches.reruns.enqueue", lambda trial_ids: ids.extend(trial_ids))
    return ids


@pytest.fixture
def cast():
    return make_cast()


@pytest.fixture
def batch(cast):
    # case-000 fails its first trial under every variant; case-001 passes everything.
    return make_batch_with_grid(
        cast.acme,
        cases=2,
        variants=2,
        trials=2,
        status=lambda c, v, t: S.FAILED if (c, t) == (0, 0) else S.PASSED,
    )


def newest_batch() -> Batch:
    return Batch.objects.order_by("-id").first()


def test_it_reruns_one_cell_and_goes_to_the_new_batch(
    client, cast, batch, queued, django_capture_on_commit_callbacks
):
    run = batch.runs.order_by("id").first()
    client.force_login(cast.bob)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/runs/{run.pk}/rerun/")
    new = newest_batch()
    assert response.status_code == 302 and response["Location"] == f"/batches/{new.pk}/"
    assert new.parent_id == batch.pk
    assert new.created_by == cast.bob
    assert list(new.runs.values_list("case_version_id", "variant_id")) == [
        (run.case_version_id, run.variant_id)
    ]
    assert sorted(queued) == sorted(
        Trial.objects.filter(run__batch=new).values_list("id", flat=True)
    )
    assert len(queued) == 2


def test_it_reruns_a_case_row_the_whole_batch_and_only_the_failed_trials(
    client, cast, batch, queued, django_capture_on_commit_callbacks
):
    client.force_login(cast.alice)
    case = batch.runs.order_by("id").first().case_version.case
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/batches/{batch.pk}/cases/{case.pk}/rerun/")
    assert newest_batch().runs.count() == 2  # one row: every variant
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/batches/{batch.pk}/rerun/")
    assert Trial.objects.filter(run__batch=newest_batch()).count() == 8
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/batches/{batch.pk}/rerun-failed/")
    # Only case-000's first trial failed, under each of the two variants.
    assert Trial.objects.filter(run__batch=newest_batch()).count() == 2
    assert all(b.parent_id == batch.pk for b in Batch.objects.exclude(pk=batch.pk))


def test_it_sends_htmx_to_the_new_batch_with_a_client_redirect(client, cast, batch, queued):
    client.force_login(cast.alice)
    response = client.post(f"/batches/{batch.pk}/rerun/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"/batches/{newest_batch().pk}/"


def test_it_says_there_is_nothing_to_rerun_when_nothing_failed(client, cast, queued):
    clean = make_batch_with_grid(cast.acme, cases=1, variants=1)
    client.force_login(cast.alice)
    response = client.post(f"/batches/{clean.pk}/rerun-failed/", follow=True)
    assert b"Nothing to rerun" in response.content
    assert newest_batch() == clean
    assert queued == []


def test_it_only_reruns_with_a_post_that_carries_the_csrf_token(cast, batch, queued):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(cast.alice)
    run = batch.runs.first()
    assert strict.get(f"/runs/{run.pk}/rerun/").status_code == 405
    assert strict.post(f"/runs/{run.pk}/rerun/").status_code == 403
    assert newest_batch() == batch

    page = strict.get(f"/runs/{run.pk}/")
    token = page.cookies["csrftoken"].value
    assert strict.post(f"/runs/{run.pk}/rerun/", {"csrfmiddlewaretoken": token}).status_code == 302
    assert newest_batch().parent_id == batch.pk


def test_it_answers_404_to_a_rerun_of_another_organizations_batch(client, cast, batch, queued):
    client.force_login(cast.charlie)
    run = batch.runs.first()
    case = run.case_version.case
    for url in (
        f"/runs/{run.pk}/rerun/",
        f"/batches/{batch.pk}/rerun/",
        f"/batches/{batch.pk}/rerun-failed/",
        f"/batches/{batch.pk}/cases/{case.pk}/rerun/",
    ):
        assert client.post(url).status_code == 404, url
    assert newest_batch() == batch


def test_a_rerun_of_an_old_version_says_which_version_it_reruns(
    client, cast, batch, queued, django_capture_on_commit_callbacks
):
    run = batch.runs.order_by("id").first()
    case = run.case_version.case
    client.force_login(cast.alice)
    assert "Reruns v1" not in client.get(f"/runs/{run.pk}/").content.decode()
    # The eval file was edited twice since: versions 2 and 3 of the case are recorded.
    for number in (2, 3):
        CaseVersion.objects.create(
            case=case,
            number=number,
            definition={**run.case_version.definition, "prompt": f"edit {number}"},
            definition_hash=f"{number:064d}",
            module_path=run.case_version.module_path,
        )

    run_page = client.get(f"/runs/{run.pk}/").content.decode()
    trial_page = client.get(f"/trials/{run.trials.first().pk}/").content.decode()
    grid = client.get(f"/batches/{batch.pk}/").content.decode()

    for page in (run_page, trial_page):
        assert "Reruns v1, the version shown; the latest recorded version is v3." in page
    assert "latest v3" in grid
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/runs/{run.pk}/rerun/")
    rerun = newest_batch().runs.get()
    assert rerun.case_version_id == run.case_version_id  # v1, not the latest


def test_the_grid_shows_each_variants_agent_digest(client, cast, batch):
    variant = batch.runs.order_by("id").first().variant
    Variant.objects.filter(pk=variant.pk).update(profile_digest="ab12cd34" + "0" * 56)
    client.force_login(cast.alice)
    grid = client.get(f"/batches/{batch.pk}/").content.decode()
    assert "agent ab12cd34" in grid
