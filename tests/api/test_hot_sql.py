"""The hot path's statements (``evals_app.hot_sql``) store what the ORM stores: a value of its
column's own type goes as it is, anything else (a datetime, JSON, a number of another type)
through its field, and a row read back equals one the ORM wrote. On SQLite they skip Django's
cursor, and still raise Django's errors and show in a capture of the queries."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import proctor_env

from evals_app import hot_sql
from evals_app.models import Check, Trial

from .factories import make_batch, make_case, make_org, make_variant

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]

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
    changed = hot_sql.update_where(
        Trial, FINAL_RECORD, {"pk": by_rows.pk, "status": Trial.Status.RUNNING}
    )
    assert changed == 1
    assert _record(by_rows) == _record(by_orm)
    assert _record(by_rows)["cost_usd"] == 1.0
    assert isinstance(_record(by_rows)["cost_usd"], float)
    # The fence holds: a row that no longer matches is left alone.
    assert hot_sql.update_where(Trial, {"answer": "x"}, {"pk": by_rows.pk, "status": "queued"}) == 0
    assert _record(by_rows)["answer"] == "héllo\nworld"


def test_update_where_returns_the_columns_asked_for(two_trials) -> None:
    trial = two_trials[0]
    rows = hot_sql.update_where(
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
    hot_sql.insert_rows(Check, checks(by_rows)[:1])  # one row: one execute
    hot_sql.insert_rows(Check, checks(by_rows)[1:])  # more: one executemany
    hot_sql.insert_rows(Check, [])  # nothing: no statement

    fields = ["index", "name", "kind", "passed", "score", "weight", "metric", "message"]
    fields += ["output", "source_ref", "duration_ms"]

    def stored(trial: Trial) -> list[tuple]:
        return list(Check.objects.filter(trial=trial).order_by("index").values_list(*fields))

    assert stored(by_rows) == stored(by_orm)
    assert [row[5] for row in stored(by_rows)] == [2.0, 2.0, 2.0]


def test_insert_copies_stores_what_bulk_create_stores(two_trials) -> None:
    run = two_trials[0].run
    # More rows than one statement takes (65,535 parameters on PostgreSQL): two statements.
    count = 65_535 // len([f for f in Trial._meta.concrete_fields if f.name != "id"]) + 10
    by_orm = Trial.objects.bulk_create([Trial(run=run, index=100 + i) for i in range(3)])

    ids = hot_sql.insert_copies(
        Trial, Trial(), [{"run_id": run.pk, "index": 1000 + i} for i in range(count)]
    )

    assert len(ids) == count
    # In the order of the changes given.
    assert list(
        Trial.objects.filter(pk__in=ids).order_by("pk").values_list("index", flat=True)
    ) == list(range(1000, 1000 + count))
    assert dict(Trial.objects.filter(pk__in=ids).values_list("pk", "index")) == dict(
        zip(ids, range(1000, 1000 + count), strict=True)
    )
    left_out = {"id", "index", "queued_at"}
    names = [f.attname for f in Trial._meta.concrete_fields if f.attname not in left_out]
    orm_row = Trial.objects.filter(pk=by_orm[0].pk).values(*names).get()
    for row in Trial.objects.filter(pk__in=[ids[0], ids[-1]]).values(*names):
        assert row == orm_row
    queued = Trial.objects.get(pk=ids[-1]).queued_at
    assert abs(queued - Trial.objects.get(pk=by_orm[0].pk).queued_at) < timedelta(seconds=60)
    # The run's counts (kept by triggers) saw every row.
    run.refresh_from_db()
    assert run.trials_total == 2 + 3 + count


def test_insert_copies_refuses_changes_of_different_fields(two_trials) -> None:
    run = two_trials[0].run
    with pytest.raises(ValueError, match="same fields"):
        hot_sql.insert_copies(
            Trial, Trial(), [{"run_id": run.pk, "index": 1}, {"run_id": run.pk, "attempt": 2}]
        )
    assert hot_sql.insert_copies(Trial, Trial(), []) == []


def test_a_datetime_goes_through_its_field(two_trials) -> None:
    trial = two_trials[0]
    moment = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC) + timedelta(microseconds=7)
    hot_sql.update_where(Trial, {"started_at": moment}, {"pk": trial.pk})
    trial.refresh_from_db()
    assert trial.started_at == moment


# Run in a `proctor`-like process of its own on each database: the suite's own connection is
# PostgreSQL's when it answers, and the DB-API path is SQLite's.
PROBE = """
import json, os
import django
os.environ["DJANGO_SETTINGS_MODULE"] = "proctor.site.settings"
django.setup()
from django.db import IntegrityError, connection, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext
from runner.jobs.database import ensure_database
from evals_app import hot_sql

ensure_database()
seen = {"vendor": connection.vendor}
hot_sql.execute("CREATE TABLE probe (name text UNIQUE)", [])
hot_sql.execute("INSERT INTO probe (name) VALUES (%s)", ["a"])
hot_sql.execute("INSERT INTO probe (name) VALUES (%s)", [["b"], ["c"]], many=True)
seen["changed"] = hot_sql.execute("UPDATE probe SET name = name || %s WHERE name <> %s", ["!", "a"])
seen["rows"] = hot_sql.execute("SELECT name FROM probe ORDER BY name", [], fetch=True)
seen["percent"] = hot_sql.execute("SELECT %s || '%%'", ["5"], fetch=True)
try:
    hot_sql.execute("INSERT INTO probe (name) VALUES (%s)", ["a"])
except IntegrityError as exc:
    seen["duplicate"] = type(exc).__module__
with transaction.atomic():
    try:
        with transaction.atomic(savepoint=False):
            hot_sql.execute("INSERT INTO probe (name) VALUES (%s)", ["a"])
    except IntegrityError:
        pass
    try:
        hot_sql.execute("SELECT 1", [], fetch=True)
    except TransactionManagementError:
        seen["broken_transaction_refused"] = True
with CaptureQueriesContext(connection) as captured:
    hot_sql.execute("SELECT %s", [1], fetch=True)
seen["captured"] = [query["sql"] for query in captured.captured_queries]

# Every value adapted as the field itself adapts it (SQLite's own quicker ways included).
from datetime import UTC, datetime, timedelta, timezone
from evals_app.models import Trial
samples = {
    "finished_at": [
        datetime.now(UTC),
        datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
        datetime(2030, 1, 2, 3, 4, 5, 7, tzinfo=timezone(timedelta(hours=2))),
        None,
    ],
    "outside_writes": [[], [{"path": "/tmp/é", "n": None}], {"a": [1, 2.5, True]}, "text", None],
}
unlike = []
for name, values in samples.items():
    field = Trial._meta.get_field(name)
    for value in values:
        ours = hot_sql._preparer(Trial, name, connection.vendor)(value)
        theirs = field.get_db_prep_save(value, connection)
        if getattr(ours, "obj", ours) != getattr(theirs, "obj", theirs):  # psycopg's Jsonb
            unlike.append([name, repr(value), repr(ours), repr(theirs)])
seen["unlike_the_field"] = unlike
print(json.dumps(seen))
"""


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_statements_behave_alike_on_both_databases(database, request, tmp_path) -> None:
    env = proctor_env(tmp_path / "home")
    if database == "postgres":
        env["DATABASE_URL"] = request.getfixturevalue("fresh_postgres_url")
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["vendor"] == ("postgresql" if database == "postgres" else "sqlite")
    assert seen["changed"] == 2
    assert seen["rows"] == [["a"], ["b!"], ["c!"]]
    assert seen["percent"] == [["5%"]]
    # Django's own error, not the driver's, whatever path the statement took.
    assert seen["duplicate"] == "django.db.utils"
    assert seen["broken_transaction_refused"] is True
    # A capture of the queries (assertNumQueries, the debug toolbar) still sees the statement.
    assert len(seen["captured"]) == 1
    assert seen["captured"][0].startswith("SELECT")
    assert seen["unlike_the_field"] == []
