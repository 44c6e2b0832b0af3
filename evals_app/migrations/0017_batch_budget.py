"""A batch's budget (issue 32): the cap on what it may spend, what it had spent when it stopped,
the trial status budget_exhausted, and each run's count of such trials, kept by the run-count
triggers of migration 0009, made again here with the new column among their counts."""

import importlib

from django.db import migrations, models

_counting = importlib.import_module("evals_app.migrations.0009_run_trial_counts")

COUNTS = {
    **_counting.COUNTS,
    "trials_budget_exhausted": "CASE WHEN {r}.status = 'budget_exhausted' THEN 1 ELSE 0 END",
}


# The triggers go first: SQLite rebuilds the run table to add its column, and a rename under a
# trigger that names the table fails ("no such table: main.evals_app_run").
def stop_counting(apps, schema_editor) -> None:
    _counting.stop_counting(apps, schema_editor)


def count_as_before(apps, schema_editor) -> None:
    _counting.count_and_keep_counting(apps, schema_editor)


def count_budget_exhausted(apps, schema_editor) -> None:
    _counting.count_and_keep_counting(apps, schema_editor, COUNTS)


class Migration(migrations.Migration):
    dependencies = [("evals_app", "0016_consultation_usage")]

    operations = [
        migrations.RunPython(stop_counting, count_as_before),
        migrations.AddField(
            model_name="batch",
            name="max_cost_usd",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="batch",
            name="budget_reached_usd",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="trials_budget_exhausted",
            field=models.IntegerField(default=0, editable=False),
        ),
        migrations.AlterField(
            model_name="trial",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"),
                    ("running", "Running"),
                    ("passed", "Passed"),
                    ("failed", "Failed"),
                    ("timed_out", "Timed Out"),
                    ("errored", "Errored"),
                    ("budget_exhausted", "Budget Exhausted"),
                ],
                default="queued",
                max_length=20,
            ),
        ),
        migrations.RunPython(count_budget_exhausted, stop_counting),
    ]
