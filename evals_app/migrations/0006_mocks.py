"""Schema changes for issue 13 (mock call logs)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("evals_app", "0005_compare_and_cost")]

    operations = [
        migrations.CreateModel(
            name="MockCall",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("mock", models.CharField(max_length=40)),
                (
                    "kind",
                    models.CharField(
                        choices=[("api", "Api"), ("cli", "Cli"), ("mcp", "Mcp")], max_length=3
                    ),
                ),
                ("seq", models.PositiveIntegerField()),
                ("at", models.DateTimeField()),
                ("method", models.CharField(blank=True, default="", max_length=40)),
                ("path", models.CharField(blank=True, default="", max_length=500)),
                ("status", models.IntegerField(blank=True, null=True)),
                ("duration_ms", models.PositiveBigIntegerField(default=0)),
                ("record", models.JSONField(default=dict)),
                (
                    "trial",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="mock_calls",
                        to="evals_app.trial",
                    ),
                ),
            ],
            options={
                "ordering": ["trial", "at", "id"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("trial", "mock", "seq"), name="mock_call_seq_unique_in_trial"
                    )
                ],
            },
        ),
    ]
