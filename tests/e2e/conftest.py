"""Fixtures of the end-to-end tests: a Backend per database, per test or shared by a module."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import proctor_env
from e2e.running import Backend


@pytest.fixture
def backend(backend_env: dict[str, str]) -> Backend:
    """A fresh database of each kind (SQLite, PostgreSQL) for one test."""
    return Backend("postgres" if "DATABASE_URL" in backend_env else "sqlite", backend_env)


@pytest.fixture
def sqlite_backend(tmp_path: Path) -> Backend:
    """The embedded default only, for behaviour that does not depend on the database."""
    return Backend("sqlite", proctor_env(tmp_path / "proctor-home"))


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def module_backend(request, tmp_path_factory) -> Iterator[Backend]:
    """A database of each kind shared by the tests of one module (each `proctor` run costs
    seconds, so a module records once and several tests read the result)."""
    home = tmp_path_factory.mktemp("proctor-home")
    if request.param == "sqlite":
        yield Backend("sqlite", proctor_env(home))
        return
    import psycopg

    admin_url = request.getfixturevalue("postgres_admin_url")
    name = f"proctor_e2e_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield Backend("postgres", proctor_env(home, DATABASE_URL=f"{admin_url.rsplit('/', 1)[0]}/{name}"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
