"""Indexes that another one already covers are dropped, as every trial's claim and final row
paid to keep them: a trial's run and a turn's or check's trial lead the unique (run, index) and
(trial, index) constraints' indexes, and a trial's status leads the lease index.

The key indexes are dropped by name rather than by altering the fields, which on SQLite would
copy each table whole."""

import django.db.models.deletion
from django.db import migrations, models

# (model, key column) of the key indexes dropped.
KEY_INDEXES = (("trial", "run_id"), ("turn", "trial_id"), ("check", "trial_id"))


def _key_indexes(apps, schema_editor):
    """Each dropped key index: its table, its column and the name Django gave it."""
    for model_name, column in KEY_INDEXES:
        table = apps.get_model("evals_app", model_name)._meta.db_table
        yield table, column, schema_editor._create_index_name(table, [column], suffix="")


def drop_key_indexes(apps, schema_editor):
    for _, _, name in _key_indexes(apps, schema_editor):
        schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(name)}")


def make_key_indexes(apps, schema_editor):
    quote = schema_editor.quote_name
    for table, column, name in _key_indexes(apps, schema_editor):
        schema_editor.execute(f"CREATE INDEX {quote(name)} ON {quote(table)} ({quote(column)})")


class Migration(migrations.Migration):
    dependencies = [
        ("evals_app", "0010_events_without_database_foreign_key"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="trial", name="trial_status"),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="trial",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="trials",
                        to="evals_app.run",
                    ),
                ),
                migrations.AlterField(
                    model_name="turn",
                    name="trial",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="turns",
                        to="evals_app.trial",
                    ),
                ),
                migrations.AlterField(
                    model_name="check",
                    name="trial",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="checks",
                        to="evals_app.trial",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(drop_key_indexes, make_key_indexes)],
        ),
    ]
