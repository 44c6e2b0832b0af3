"""The scaled mode's outbox: trials committed as queued whose message the broker has not taken
yet (issue 36), re-sent by the reaper."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evals_app", "0013_trial_labels"),
    ]

    operations = [
        migrations.CreateModel(
            name="UnsentTrial",
            fields=[
                (
                    "trial",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="evals_app.trial",
                    ),
                ),
                ("since", models.DateTimeField(default=django.utils.timezone.now)),
            ],
        ),
    ]
