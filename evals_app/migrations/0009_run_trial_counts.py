"""Each run counts its trials (by status, tokens, time, attempts and cost) in columns that
database triggers keep on every insert, update and delete of a trial, whatever wrote it: the
grid, the API lists and the flaky counts then read a batch's runs, not its trials.

SQLite gets row triggers. PostgreSQL gets statement triggers over the changed rows: a statement
that ends many trials locks their runs once, after its trials, so it cannot deadlock with a
worker ending one trial. SQLite drops a table's triggers when a migration rebuilds the table:
a later migration that rebuilds evals_app_trial there must create them again
(tests/dashboard/test_run_trial_counts.py fails when a count is not kept).
"""

from django.db import migrations, models

# Each counted column and what one trial row ``{r}`` adds to it.
COUNTS = {
    "trials_total": "1",
    "trials_queued": "CASE WHEN {r}.status = 'queued' THEN 1 ELSE 0 END",
    "trials_passed": "CASE WHEN {r}.status = 'passed' THEN 1 ELSE 0 END",
    "trials_failed": "CASE WHEN {r}.status = 'failed' THEN 1 ELSE 0 END",
    "trials_timed_out": "CASE WHEN {r}.status = 'timed_out' THEN 1 ELSE 0 END",
    "trials_errored": "CASE WHEN {r}.status = 'errored' THEN 1 ELSE 0 END",
    "trials_running": "CASE WHEN {r}.status = 'running' THEN 1 ELSE 0 END",
    # The trials whose conversation warnings evals_app.pass_rates.validity_warnings reads.
    "trials_stopped_or_planning": (
        "CASE WHEN {r}.conversation_outcome = 'stopped' OR {r}.plan_state = 'planning' "
        "THEN 1 ELSE 0 END"
    ),
    "trials_tokens": "{r}.input_tokens + {r}.output_tokens",
    "trials_duration_ms": "COALESCE({r}.duration_ms, 0)",
    "trials_timed": "CASE WHEN {r}.duration_ms IS NULL THEN 0 ELSE 1 END",
    "trials_retried": "CASE WHEN {r}.attempt > 1 THEN 1 ELSE 0 END",
    "trials_costed": "CASE WHEN {r}.cost_usd IS NULL THEN 0 ELSE 1 END",
    "trials_cost_usd": "COALESCE({r}.cost_usd, 0)",
}
# The highest attempt: raised by a trial written with a higher one, counted again over the run's
# trials when a trial with the highest is deleted or lowered.
LAST_ATTEMPT = "trials_last_attempt"
_HIGHEST_OF_RUN = (
    "(SELECT COALESCE(MAX(t.attempt), 0) FROM evals_app_trial t WHERE t.run_id = {run})"
)
# The trial columns the counts read; an UPDATE that changes none of them counts nothing.
READ = (
    "run_id",
    "status",
    "conversation_outcome",
    "plan_state",
    "input_tokens",
    "output_tokens",
    "duration_ms",
    "attempt",
    "cost_usd",
)


def _sets(row: str, sign: str, counts: dict[str, str]) -> str:
    return ", ".join(f"{col} = {col} {sign} ({expr.format(r=row)})" for col, expr in counts.items())


# The triggers are made from ``counts`` (COUNTS here; a later migration that counts one more
# column makes them again from its own).
def _sqlite_triggers(counts: dict[str, str]) -> list[str]:
    changed = " OR ".join(f"OLD.{col} IS NOT NEW.{col}" for col in READ)
    same_run = ", ".join(
        f"{col} = {col} + ({expr.format(r='NEW')}) - ({expr.format(r='OLD')})"
        for col, expr in counts.items()
    )
    raise_last = f"{LAST_ATTEMPT} = max({LAST_ATTEMPT}, NEW.attempt)"
    recount_old = f"{LAST_ATTEMPT} = {_HIGHEST_OF_RUN.format(run='OLD.run_id')}"
    update_last = (
        f"{LAST_ATTEMPT} = CASE WHEN NEW.attempt >= OLD.attempt THEN max({LAST_ATTEMPT}, "
        f"NEW.attempt) ELSE {_HIGHEST_OF_RUN.format(run='NEW.run_id')} END"
    )
    return [
        f"""CREATE TRIGGER run_counts_on_trial_insert AFTER INSERT ON evals_app_trial BEGIN
            UPDATE evals_app_run SET {_sets("NEW", "+", counts)}, {raise_last} WHERE id = NEW.run_id;
            END""",
        f"""CREATE TRIGGER run_counts_on_trial_delete AFTER DELETE ON evals_app_trial BEGIN
            UPDATE evals_app_run SET {_sets("OLD", "-", counts)}, {recount_old} WHERE id = OLD.run_id;
            END""",
        f"""CREATE TRIGGER run_counts_on_trial_update AFTER UPDATE OF {", ".join(READ)}
            ON evals_app_trial WHEN OLD.run_id = NEW.run_id AND ({changed}) BEGIN
            UPDATE evals_app_run SET {same_run}, {update_last} WHERE id = NEW.run_id; END""",
        f"""CREATE TRIGGER run_counts_on_trial_move AFTER UPDATE OF run_id ON evals_app_trial
            WHEN OLD.run_id IS NOT NEW.run_id BEGIN
            UPDATE evals_app_run SET {_sets("OLD", "-", counts)}, {recount_old} WHERE id = OLD.run_id;
            UPDATE evals_app_run SET {_sets("NEW", "+", counts)}, {raise_last} WHERE id = NEW.run_id;
            END""",
    ]


def _postgres_sql(counts: dict[str, str]) -> list[str]:
    sums = ", ".join(f"SUM(sign * ({expr.format(r='c')})) AS {col}" for col, expr in counts.items())
    sets = ", ".join(f"{col} = r.{col} + d.{col}" for col in counts)
    changed = " OR ".join(f"d.{col} <> 0" for col in counts)

    def apply(rows: str) -> str:
        # The changed rows' highest attempt, before and after: when they differ the run's
        # highest is counted again (a raise alone would do, but a trial may be lowered).
        return f"""UPDATE evals_app_run r SET {sets},
                {LAST_ATTEMPT} = CASE
                    WHEN d.old_last IS NULL THEN GREATEST(r.{LAST_ATTEMPT}, d.new_last)
                    WHEN d.new_last IS NOT DISTINCT FROM d.old_last THEN r.{LAST_ATTEMPT}
                    ELSE {_HIGHEST_OF_RUN.format(run="r.id")} END
            FROM (SELECT c.run_id, {sums},
                         MAX(c.attempt) FILTER (WHERE sign = 1) AS new_last,
                         MAX(c.attempt) FILTER (WHERE sign = -1) AS old_last
                  FROM ({rows}) c GROUP BY c.run_id) d
            WHERE r.id = d.run_id
                AND ({changed} OR d.new_last IS DISTINCT FROM d.old_last);"""

    function = f"""CREATE FUNCTION run_counts_on_trials() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                {apply("SELECT 1 AS sign, * FROM new_trials")}
            ELSIF TG_OP = 'DELETE' THEN
                {apply("SELECT -1 AS sign, * FROM old_trials")}
            ELSE
                {apply("SELECT 1 AS sign, * FROM new_trials UNION ALL SELECT -1, * FROM old_trials")}
            END IF;
            RETURN NULL;
        END $$"""
    triggers = [
        f"""CREATE TRIGGER run_counts_on_trial_{op.lower()} AFTER {op} ON evals_app_trial
            REFERENCING {tables} FOR EACH STATEMENT EXECUTE FUNCTION run_counts_on_trials()"""
        for op, tables in (
            ("INSERT", "NEW TABLE AS new_trials"),
            ("UPDATE", "OLD TABLE AS old_trials NEW TABLE AS new_trials"),
            ("DELETE", "OLD TABLE AS old_trials"),
        )
    ]
    return [function, *triggers]


def backfill(counts: dict[str, str]) -> str:
    totals = ", ".join(f"SUM({expr.format(r='t')}) AS {col}" for col, expr in counts.items())
    return f"""UPDATE evals_app_run SET {", ".join(f"{col} = d.{col}" for col in counts)},
        {LAST_ATTEMPT} = d.last_attempt
    FROM (SELECT t.run_id, {totals}, MAX(t.attempt) AS last_attempt
          FROM evals_app_trial t GROUP BY t.run_id) d
    WHERE evals_app_run.id = d.run_id"""


def count_and_keep_counting(apps, schema_editor, counts: dict[str, str] = COUNTS) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        statements = _sqlite_triggers(counts)
    elif vendor == "postgresql":
        statements = _postgres_sql(counts)
    else:
        raise NotImplementedError(
            f"Proctor keeps run counts on SQLite and PostgreSQL, not {vendor}."
        )
    schema_editor.execute(backfill(counts))
    for statement in statements:
        schema_editor.execute(statement)


def stop_counting(apps, schema_editor) -> None:
    for op in ("insert", "update", "delete", "move"):
        schema_editor.execute(
            f"DROP TRIGGER IF EXISTS run_counts_on_trial_{op}"
            + (" ON evals_app_trial" if schema_editor.connection.vendor == "postgresql" else "")
        )
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP FUNCTION IF EXISTS run_counts_on_trials()")


def _count(name: str, big: bool = False) -> migrations.AddField:
    field = models.BigIntegerField if big else models.IntegerField
    return migrations.AddField("run", name, field(default=0, editable=False))


class Migration(migrations.Migration):
    dependencies = [("evals_app", "0008_first_users")]

    operations = [
        *(
            _count(name, big=name in ("trials_tokens", "trials_duration_ms"))
            for name in [*COUNTS, LAST_ATTEMPT]
            if name != "trials_cost_usd"
        ),
        migrations.AddField(
            "run", "trials_cost_usd", models.FloatField(default=0.0, editable=False)
        ),
        migrations.RunPython(count_and_keep_counting, stop_counting),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("trials_stopped_or_planning__gt", 0)),
                fields=["batch"],
                name="run_with_cut_short_trials",
            ),
        ),
    ]
