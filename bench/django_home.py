"""A fresh Proctor home and database for a bench that drives Django in its own process
(bench/grid.py, bench/side_by_side.py): SQLite in a temp folder, or a new database on a given
PostgreSQL server, migrated, with no Redis."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path


def set_up(prefix: str, postgres: str | None, database: str) -> None:
    """Point Proctor at a new home (and, with ``postgres``, the new database ``database`` on
    that server), set Django up and migrate."""
    home = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["PROCTOR_HOME"] = str(home)
    os.environ.pop("REDIS_URL", None)
    if postgres:
        os.environ["DATABASE_URL"] = _fresh_postgres(postgres.rstrip("/"), database)
    else:
        os.environ.pop("DATABASE_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "proctor.site.settings"
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import django

    django.setup()
    from runner.jobs.database import ensure_database

    ensure_database()


def _fresh_postgres(server: str, name: str) -> str:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    return f"{server}/{name}"
