"""Schema changes for issue 13 (mock call logs)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("evals_app", "0005_compare_and_cost")]

    operations: list = []
