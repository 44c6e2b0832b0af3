"""Each trial's sandboxes that live with a provider (issue 37), for the reaper to kill when the
worker running the trial died. SQLite rebuilds the trial table to add the column, which drops
the run-count triggers on it: they are taken down first and made again after, as they were."""

import importlib

from django.db import migrations, models

_counting = importlib.import_module("evals_app.migrations.0009_run_trial_counts")
_budget = importlib.import_module("evals_app.migrations.0017_batch_budget")


def stop_counting(apps, schema_editor) -> None:
    _counting.stop_counting(apps, schema_editor)


def count_again(apps, schema_editor) -> None:
    _counting.count_and_keep_counting(apps, schema_editor, _budget.COUNTS)


class Migration(migrations.Migration):
    dependencies = [("evals_app", "0017_batch_budget")]

    operations = [
        migrations.RunPython(stop_counting, count_again),
        migrations.AddField(
            model_name="trial",
            name="remote_sandboxes",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.RunPython(count_again, stop_counting),
    ]
