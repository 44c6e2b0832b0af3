"""The hot path's row writes (``evals_app.row_writes``) store what the ORM stores: a value of its
column's own type goes as it is, anything else (a datetime, JSON, a number of another type)
through its field, and a row read back equals one the ORM wrote."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from evals_app import row_writes
from evals_app.models import Check, Trial

from .factories import make_batch, make_case, make_org, make_variant

pytestmark = pytest.mark.django_db

FINAL_RECORD = {
    "status": Trial.Status.PASSED,
    "finish_reason": "done",
    "answer": "héllo\nworld",
    "session_id": "s-1",
    "outside_writes": [{"path": "/etc/x", "note": None}],
    "input_tokens": 2**40,
    "output_tokens": 0,
    "cost_usd": 1,  # an int for a float column: through the field
    "score": 0.75,
    "threshold": None,
    "duration_ms": 1234,
    "finished_at": datetime(2026, 12, 2, 10, 30, 15, 123456, tzinfo=UTC),
    "lease_expires_at": None,
}


@pytest.fixture
def two_trials():
    org = make_org("rows")
    batch = make_batch(
        org,
        [make_case(org, "calc")],
        [make_variant(org, "a")],
        statuses=["running", "running"],
    )
    return list(Trial.objects.filter(run__batch=batch).order_by("index"))


def _record(trial: Trial) -> dict:
    trial.refresh_from_db()
    return {name: getattr(trial, name) for name in FINAL_RECORD}


def test_update_where_stores_what_the_orm_stores(two_trials) -> None:
    by_orm, by_rows = two_trials
    Trial.objects.filter(pk=by_orm.pk).update(**FINAL_RECORD)
    changed = row_writes.update_where(
        Trial, FINAL_RECORD, {"pk": by_rows.pk, "status": Trial.Status.RUNNING}
    )
    assert changed == 1
    assert _record(by_rows) == _record(by_orm)
    assert _record(by_rows)["cost_usd"] == 1.0
    assert isinstance(_record(by_rows)["cost_usd"], float)
    # The fence holds: a row that no longer matches is left alone.
    assert (
        row_writes.update_where(Trial, {"answer": "x"}, {"pk": by_rows.pk, "status": "queued"}) == 0
    )
    assert _record(by_rows)["answer"] == "héllo\nworld"


def test_update_where_returns_the_columns_asked_for(two_trials) -> None:
    trial = two_trials[0]
    rows = row_writes.update_where(
        Trial, {"lease_owner": "me"}, {"pk": trial.pk}, returning=("run", "index", "attempt")
    )
    assert rows == [(trial.run_id, trial.index, trial.attempt)]


def test_insert_rows_stores_what_the_orm_stores(two_trials) -> None:
    by_orm, by_rows = two_trials
    Check.objects.filter(trial__in=two_trials).delete()

    def checks(trial: Trial) -> list[Check]:
        return [
            Check(
                trial_id=trial.pk,
                index=index,
                name=f"check {index}",
                kind="assertion",
                passed=index % 2 == 0,
                score=None if index else 0.5,
                weight=2,  # an int for a float column
                metric="m" * index,
                message="ünïcode",
                output="",
                source_ref={"file": "x.eval.py", "line": index + 1} if index else {},
                duration_ms=index,
            )
            for index in range(3)
        ]

    Check.objects.bulk_create(checks(by_orm))
    row_writes.insert_rows(Check, checks(by_rows)[:1])  # one row: one execute
    row_writes.insert_rows(Check, checks(by_rows)[1:])  # more: one executemany
    row_writes.insert_rows(Check, [])  # nothing: no statement

    fields = ["index", "name", "kind", "passed", "score", "weight", "metric", "message"]
    fields += ["output", "source_ref", "duration_ms"]

    def stored(trial: Trial) -> list[tuple]:
        return list(Check.objects.filter(trial=trial).order_by("index").values_list(*fields))

    assert stored(by_rows) == stored(by_orm)
    assert [row[5] for row in stored(by_rows)] == [2.0, 2.0, 2.0]


def test_a_datetime_goes_through_its_field(two_trials) -> None:
    trial = two_trials[0]
    moment = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC) + timedelta(microseconds=7)
    row_writes.update_where(Trial, {"started_at": moment}, {"pk": trial.pk})
    trial.refresh_from_db()
    assert trial.started_at == moment
