"""Bringing the database schema up to date before the first command that needs it, so an
embedded install works with nothing run by hand.

Commands started together on a new database (parallel `proctor eval`s of one project, a server
and a worker) take turns: one migrates while the others wait, then find nothing left to do.
Unlocked, each one created the same tables and all but the first stopped with a traceback.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from django.core.management import CommandError, call_command
from django.db import OperationalError, connection
from django.db.backends.sqlite3.creation import DatabaseCreation
from django.db.migrations.executor import MigrationExecutor

from proctor.site.backends.sqlite3.base import make_folder_of

# The key of the PostgreSQL advisory lock held while migrating: any fixed number, the same in
# every Proctor process ("proctor" in ASCII).
MIGRATION_LOCK_KEY = 0x70726F63746F72


def ensure_database() -> None:
    """Apply pending migrations (quietly); a no-op costing one query when up to date."""
    require_connection()
    if not _migrations_pending():
        return
    with _migration_lock():
        # Another process may have migrated while this one waited for the lock.
        if _migrations_pending():
            call_command("migrate", interactive=False, verbosity=0)


def require_connection() -> None:
    """Connect to the database, or raise a CommandError of one sentence saying which database
    could not be reached or opened, and why."""
    try:
        connection.ensure_connection()
    except OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CommandError(
            f"cannot use the {_described(connection.settings_dict)}: {reason}", returncode=2
        ) from None


def _described(database: dict) -> str:
    """Which database, without its password, and what to check."""
    if database["ENGINE"].endswith("sqlite3"):
        named_by = "DATABASE_URL" if os.environ.get("DATABASE_URL", "").strip() else "PROCTOR_HOME"
        return f"SQLite database {database['NAME']} ({named_by})"
    where = f"{database.get('HOST') or 'localhost'}:{database.get('PORT') or 5432}"
    return (
        f"database {database['NAME']} at {where} (DATABASE_URL: is the server running, does "
        "the database exist?)"
    )


def _migrations_pending() -> bool:
    executor = MigrationExecutor(connection)  # reads what is applied now
    return bool(executor.migration_plan(executor.loader.graph.leaf_nodes()))


@contextlib.contextmanager
def _migration_lock() -> Iterator[None]:
    """Hold the database's migration lock: PostgreSQL's session advisory lock, or an exclusive
    lock on a file beside the SQLite database (SQLite's own locks last one transaction, and a
    migration is many)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK_KEY])
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [MIGRATION_LOCK_KEY])
    elif connection.vendor == "sqlite" and not DatabaseCreation.is_in_memory_db(
        connection.settings_dict["NAME"]
    ):
        database = Path(connection.settings_dict["NAME"])
        make_folder_of(database)  # the lock is taken before the database is first opened
        # Left in place after use: removing a lock file lets a later process lock another one.
        with open(database.with_name(f"{database.name}-migration.lock"), "a") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock_file, fcntl.LOCK_UN)
    else:
        yield
