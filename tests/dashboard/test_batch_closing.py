"""A batch is closed by the end of its last trial, and only then: each trial's end asks whether
any trial of the batch is left (queued or running), in every status a trial can have."""

from __future__ import annotations

import pytest
from factories import (
    make_batch,
    make_case,
    make_cast,
    make_run,
    make_trial,
    make_variant,
    make_version,
)

from evals_app.models import Batch, Trial
from runner.jobs.execution import finish_batch_if_done

pytestmark = pytest.mark.django_db

S = Trial.Status


def test_every_status_is_either_ended_or_left_to_run() -> None:
    assert set(Trial.ENDED_STATUSES) | set(Trial.UNFINISHED_STATUSES) == set(S.values)
    assert not set(Trial.ENDED_STATUSES) & set(Trial.UNFINISHED_STATUSES)
    # An outcome a pass rate counts is an end; budget_exhausted is an end and no outcome.
    assert set(Trial.ENDED_STATUSES) - set(Trial.FINAL_STATUSES) == {S.BUDGET_EXHAUSTED}


@pytest.mark.parametrize("left", [S.QUEUED, S.RUNNING])
def test_the_batch_stays_open_while_any_trial_is_left_and_closes_with_the_last(left) -> None:
    cast = make_cast()
    version = make_version(make_case(cast.acme, "closing"))
    batch = make_batch(cast.acme, status=Batch.Status.RUNNING)
    runs = [make_run(batch, version, make_variant(cast.acme, name)) for name in ("a", "b")]
    # Many finished trials before the one left, in the same run and in another.
    for index, status in enumerate([S.PASSED, S.FAILED, S.TIMED_OUT, S.ERRORED] * 5):
        make_trial(runs[0], index, status)
        make_trial(runs[1], index, status)
    last = make_trial(runs[1], 99, left)

    assert finish_batch_if_done(batch.pk) is False
    batch.refresh_from_db()
    assert batch.status == Batch.Status.RUNNING

    Trial.objects.filter(pk=last.pk).update(status=S.PASSED)
    assert finish_batch_if_done(batch.pk) is True
    batch.refresh_from_db()
    assert batch.status == Batch.Status.FINISHED and batch.finished_at is not None
    assert finish_batch_if_done(batch.pk) is False, "closed once"
