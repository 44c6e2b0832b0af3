"""The trial page's own controls: the previous and next trial of its cell, and a rerun of this
one trial (a POST with the CSRF token, under the same per-user rerun limit as every rerun)."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from factories import make_batch_with_grid, make_cast

from evals_app.models import Batch, Trial

pytestmark = pytest.mark.django_db

S = Trial.Status


@pytest.fixture
def queued(monkeypatch) -> list[int]:
    ids: list[int] = []
    monkeypatch.setattr("runner.batches.reruns.enqueue", lambda trial_ids: ids.extend(trial_ids))
    return ids


@pytest.fixture
def cast():
    return make_cast()


@pytest.fixture
def cell(cast):
    """The three trials of one cell, in index order."""
    batch = make_batch_with_grid(cast.acme, cases=1, variants=1, trials=3)
    return list(Trial.objects.filter(run__batch=batch).order_by("index"))


def pager(client, trial: Trial) -> str:
    html = client.get(f"/trials/{trial.pk}/").content.decode()
    return re.search(r'<nav class="trial-pager".*?</nav>', html, re.S).group(0)


def test_each_trial_links_to_its_neighbours_in_the_cell(client, cast, cell):
    client.force_login(cast.bob)
    first, middle, last = cell

    assert f'href="/trials/{middle.pk}/"' in pager(client, first)
    assert 'id="previous-trial"' not in pager(client, first)
    middle_pager = pager(client, middle)
    assert f'rel="prev" href="/trials/{first.pk}/"' in middle_pager
    assert f'rel="next" href="/trials/{last.pk}/"' in middle_pager
    assert "2 of 3" in middle_pager
    assert 'id="next-trial"' not in pager(client, last)


def test_rerunning_one_trial_queues_one_trial_of_the_same_cell(
    client, cast, cell, queued, django_capture_on_commit_callbacks
):
    client.force_login(cast.alice)
    trial = cell[1]

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/trials/{trial.pk}/rerun/")

    new = Batch.objects.order_by("-id").first()
    assert response.status_code == 302 and response["Location"] == f"/batches/{new.pk}/"
    assert new.parent_id == trial.run.batch_id and new.created_by == cast.alice
    [run] = new.runs.all()
    assert (run.case_version_id, run.variant_id) == (
        trial.run.case_version_id,
        trial.run.variant_id,
    )
    assert queued == list(Trial.objects.filter(run=run).values_list("pk", flat=True))
    assert len(queued) == 1
    assert (
        new.label
        == f"rerun of trial #2 of {trial.run.case_version.case.slug} × {trial.run.variant.name}"
    )


def test_the_rerun_needs_a_post_with_the_csrf_token(cast, cell, queued):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(cast.alice)
    trial = cell[0]

    assert browser.get(f"/trials/{trial.pk}/rerun/").status_code == 405
    assert browser.post(f"/trials/{trial.pk}/rerun/").status_code == 403
    page = browser.get(f"/trials/{trial.pk}/").content.decode()
    form = re.search(
        rf'<form method="post" action="/trials/{trial.pk}/rerun/">.*?</form>', page, re.S
    )
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.group(0)).group(1)
    assert (
        browser.post(f"/trials/{trial.pk}/rerun/", {"csrfmiddlewaretoken": token}).status_code
        == 302
    )
    assert Batch.objects.count() == 2


def test_the_rerun_counts_against_the_rerun_limit(client, cast, cell, queued, settings):
    settings.PROCTOR_RERUN_RATE = "2/minute"
    client.force_login(cast.alice)

    answers = [client.post(f"/trials/{cell[0].pk}/rerun/").status_code for _ in range(3)]

    assert answers == [302, 302, 429]
    assert Batch.objects.count() == 3


def test_another_organizations_trial_is_not_found(client, cast, cell, queued):
    client.force_login(cast.charlie)
    assert client.post(f"/trials/{cell[0].pk}/rerun/").status_code == 404
    assert Batch.objects.count() == 1


def test_a_missing_page_is_the_styled_404_with_navigation(client, cast, settings):
    settings.DEBUG = False
    client.force_login(cast.bob)

    response = client.get("/trials/987654/")

    assert response.status_code == 404
    html = response.content.decode()
    assert "Nothing here" in html and "/trials/987654/" in html
    assert 'href="/"' in html and 'href="/batches/"' in html
    assert 'rel="icon"' in html
