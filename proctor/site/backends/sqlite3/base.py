"""Django's SQLite backend, making the database's folder when it first opens the database.

Without ``DATABASE_URL`` the database lives in ``PROCTOR_HOME`` (``.proctor`` in the current
folder by default). Made when the settings were read, that folder appeared wherever any
command ran, `proctor --help` and `proctor init` included; made here, only where something is
recorded. The settings still refuse a ``PROCTOR_HOME`` that could never hold it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from django.db.backends.sqlite3 import base
from django.db.backends.sqlite3.creation import DatabaseCreation


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        try:
            make_folder_of(conn_params["database"])
        except OSError as exc:
            # As SQLite itself says it cannot open the file: Django reports it as any failed
            # connection (runner.jobs.database.require_connection: one line).
            raise sqlite3.OperationalError(
                f"cannot make the folder {exc.filename}: {exc.strerror or exc}"
            ) from exc
        return super().get_new_connection(conn_params)


def make_folder_of(database: str | Path) -> None:
    """Make the folder of the SQLite database file ``database`` (none for one in memory)."""
    if not DatabaseCreation.is_in_memory_db(database):
        Path(database).parent.mkdir(parents=True, exist_ok=True)
