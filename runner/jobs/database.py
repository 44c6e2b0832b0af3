"""Bringing the database schema up to date before the first command that needs it, so an
embedded install works with nothing run by hand."""

from __future__ import annotations

from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def ensure_database() -> None:
    """Apply pending migrations (quietly); a no-op costing one query when up to date."""
    executor = MigrationExecutor(connection)
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        call_command("migrate", interactive=False, verbosity=0)
