"""Schema changes for issue 14 (first users)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("evals_app", "0007_lean_storage")]

    operations = [
        # The admin's list reads "Batches", not "Batchs".
        migrations.AlterModelOptions(
            name="batch",
            options={"ordering": ["-created_at", "-id"], "verbose_name_plural": "batches"},
        ),
    ]
