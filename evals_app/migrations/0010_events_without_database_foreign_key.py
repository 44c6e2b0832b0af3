"""Event rows keep their trial without a database foreign key or an index of their own
(evals_app.models.Event.trial says why): on PostgreSQL the constraint and the index are
dropped; SQLite rebuilds the table without them."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evals_app", "0009_run_trial_counts"),
    ]

    operations = [
        migrations.AlterField(
            model_name="event",
            name="trial",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="events",
                to="evals_app.trial",
            ),
        ),
    ]
