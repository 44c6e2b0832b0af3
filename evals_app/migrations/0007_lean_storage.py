"""Schema changes for issue 10 (lean storage) and issue 11."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("evals_app", "0006_mocks")]

    operations: list = []
