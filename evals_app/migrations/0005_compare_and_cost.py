"""Schema changes for issue 12 (compare, baselines, labels, cost)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("evals_app", "0004_trial_leases")]

    operations = [
        migrations.AddField(
            model_name="batch",
            name="is_baseline",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="trial",
            name="cost_usd",
            field=models.FloatField(blank=True, null=True),
        ),
    ]
