"""The one place an adaptive batch decides its next trials (runner.jobs.adaptive): under the
batch's row lock, one more trial per idle undecided cell, never two for one end, and the batch
closed only once nothing is undecided and nothing runs."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from compare.seeding import F, P, Seed
from evals_app.models import Batch, Run, Trial
from runner.jobs.adaptive import continue_or_close

RULE = {"min": 7, "max": 9, "threshold": 0.5, "confidence": 0.95}


def _running_batch(seed: Seed, cells) -> Batch:
    batch = seed.batch(cells, options={"adaptive": True})
    Batch.objects.filter(pk=batch.pk).update(status=Batch.Status.RUNNING, finished_at=None)
    Run.objects.filter(batch=batch).update(adaptive=RULE)
    return batch


def _indexes(batch: Batch) -> dict[str, list[int]]:
    rows = Trial.objects.filter(run__batch=batch).order_by("index")
    found: dict[str, list[int]] = {}
    for case, index in rows.values_list("run__case_version__case__slug", "index"):
        found.setdefault(case, []).append(index)
    return found


@pytest.mark.django_db
def test_an_undecided_cell_gets_its_next_index_once_however_often_it_is_asked():
    batch = _running_batch(Seed(), {("coin", "a"): [P, F] * 3 + [P], ("sure", "a"): [P] * 7})

    closed, added = continue_or_close(batch.pk)
    again = continue_or_close(batch.pk)

    assert not closed and len(added) == 1
    assert again == (False, [])  # the coin's eighth trial is queued: it is not idle
    assert _indexes(batch) == {"coin": list(range(8)), "sure": list(range(7))}


@pytest.mark.django_db
def test_a_cell_waits_for_its_running_trial_and_the_batch_stays_open():
    batch = _running_batch(Seed(), {("coin", "a"): [P, F] * 3 + ["queued"]})

    assert continue_or_close(batch.pk) == (False, [])
    assert Batch.objects.get(pk=batch.pk).status == Batch.Status.RUNNING


@pytest.mark.django_db
def test_the_batch_closes_once_every_cell_is_decided_or_at_its_maximum():
    batch = _running_batch(Seed(), {("coin", "a"): [P, F] * 4 + [P], ("sure", "a"): [F] * 7})

    closed, added = continue_or_close(batch.pk)

    assert closed and added == []
    assert Batch.objects.get(pk=batch.pk).status == Batch.Status.FINISHED


@pytest.mark.django_db(transaction=True)
def test_two_trial_ends_asking_at_once_add_one_trial():
    batch = _running_batch(Seed(), {("coin", "a"): [P, F] * 3 + [P]})
    results: list[tuple[bool, list[int]]] = []
    start = threading.Barrier(2)

    def ask() -> None:
        start.wait()
        try:
            results.append(continue_or_close(batch.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(len(added) for _, added in results) == [0, 1]
    assert _indexes(batch) == {"coin": list(range(8))}
