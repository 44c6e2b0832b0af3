"""Each run's counts of its trials (what the grid, the API lists and the flaky counts read) stay
equal to a count of the trials themselves, whatever writes them: a bulk insert, one trial's
update, an update of many, a re-queue, a delete. The triggers differ by database: run it on
SQLite and with DATABASE_URL naming a PostgreSQL database."""

from __future__ import annotations

import pytest
from django.db.models import Count, F, Max, Q, Sum
from factories import make_batch_with_grid, make_cast, make_trial

from evals_app.models import Run, Trial

pytestmark = pytest.mark.django_db

S = Trial.Status


def _counted_from_trials() -> dict[int, dict[str, float]]:
    """Each run's counts, as a query over its trials computes them."""
    runs = Run.objects.annotate(
        c_total=Count("trials"),
        **{f"c_{status}": Count("trials", filter=Q(trials__status=status)) for status in S.values},
        c_stopped_or_planning=Count(
            "trials",
            filter=Q(trials__conversation_outcome="stopped") | Q(trials__plan_state="planning"),
        ),
        c_tokens=Sum(F("trials__input_tokens") + F("trials__output_tokens")),
        c_duration_ms=Sum("trials__duration_ms"),
        c_timed=Count("trials__duration_ms"),
        c_retried=Count("trials", filter=Q(trials__attempt__gt=1)),
        c_last_attempt=Max("trials__attempt"),
        c_costed=Count("trials__cost_usd"),
        c_cost_usd=Sum("trials__cost_usd"),
    )
    return {
        run.pk: {
            name[2:]: float(value or 0) for name, value in vars(run).items() if name[:2] == "c_"
        }
        for run in runs
    }


def _kept_by_the_database() -> dict[int, dict[str, float]]:
    names = next(iter(_counted_from_trials().values()))
    return {
        run["id"]: {name: float(run[f"trials_{name}"]) for name in names}
        for run in Run.objects.values("id", *(f"trials_{name}" for name in names))
    }


def _assert_counts_kept() -> None:
    expected = _counted_from_trials()
    kept = _kept_by_the_database()
    assert kept.keys() == expected.keys()
    for run_id, counts in expected.items():
        assert kept[run_id] == pytest.approx(counts), f"run {run_id}"


def test_a_bulk_created_grid_is_counted_by_its_runs():
    cast = make_cast()
    make_batch_with_grid(
        cast.acme,
        cases=3,
        variants=2,
        trials=4,
        status=lambda c, v, t: (S.PASSED, S.FAILED, S.TIMED_OUT, S.ERRORED)[(c + v + t) % 4],
    )

    _assert_counts_kept()
    run = Run.objects.order_by("id").first()
    assert run is not None and run.trials_total == 4


def test_the_counts_follow_every_kind_of_write():
    cast = make_cast()
    batch = make_batch_with_grid(cast.acme, cases=2, variants=2, trials=3)
    run = Run.objects.filter(batch=batch).order_by("id").first()
    assert run is not None

    queued = make_trial(run, index=7, status=S.QUEUED)
    _assert_counts_kept()
    Trial.objects.filter(pk=queued.pk).update(status=S.RUNNING, attempt=2)
    _assert_counts_kept()
    assert queued.finish(S.FAILED, cost_usd=0.25, duration_ms=1200, usage={"input_tokens": 9})
    _assert_counts_kept()
    Trial.objects.filter(run__batch=batch, index=0).update(
        status=S.ERRORED, conversation_outcome="stopped", cost_usd=0.5
    )
    _assert_counts_kept()
    # A batch stopped at its budget ends its unfinished trials in one statement.
    Trial.objects.filter(run__batch=batch, index=1).update(status=S.BUDGET_EXHAUSTED)
    _assert_counts_kept()
    Trial.objects.filter(pk=queued.pk).update(lease_owner="host:1:abc")  # counts nothing
    _assert_counts_kept()
    queued.reset()
    _assert_counts_kept()
    Trial.objects.filter(run=run).delete()
    _assert_counts_kept()
    run.refresh_from_db()
    assert (run.trials_total, run.trials_passed, run.trials_cost_usd) == (0, 0, 0.0)


def test_saving_a_run_read_earlier_leaves_its_counts_alone():
    cast = make_cast()
    batch = make_batch_with_grid(cast.acme, cases=1, variants=1, trials=2)
    run = Run.objects.get(batch=batch)
    make_trial(run, index=5, status=S.FAILED)

    run.spec = {"changed": True}
    run.save()

    run.refresh_from_db()
    assert (run.trials_total, run.trials_failed, run.spec) == (3, 1, {"changed": True})
