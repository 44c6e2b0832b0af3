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


class ModuleBackends:
    """One database of each kind for a whole module, made on first use (each `proctor` run
    costs seconds, so a module records once and several tests read or extend the result)."""

    def __init__(self, request, tmp_path_factory) -> None:
        self._request = request
        self._tmp = tmp_path_factory
        self._made: dict[str, Backend] = {}
        self._databases: list[tuple[str, str]] = []

    def get(self, kind: str) -> Backend:
        if kind not in self._made:
            home = self._tmp.mktemp(f"proctor-home-{kind}")
            if kind == "sqlite":
                self._made[kind] = Backend("sqlite", proctor_env(home))
            else:
                import psycopg

                admin_url = self._request.getfixturevalue("postgres_admin_url")
                name = f"proctor_e2e_{uuid.uuid4().hex[:12]}"
                with psycopg.connect(admin_url, autocommit=True) as conn:
                    conn.execute(f'CREATE DATABASE "{name}"')
                self._databases.append((admin_url, name))
                self._made[kind] = Backend(
                    "postgres",
                    proctor_env(home, DATABASE_URL=f"{admin_url.rsplit('/', 1)[0]}/{name}"),
                )
        return self._made[kind]

    def drop(self) -> None:
        import psycopg

        for admin_url, name in self._databases:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def module_backends(request, tmp_path_factory) -> Iterator[ModuleBackends]:
    backends = ModuleBackends(request, tmp_path_factory)
    yield backends
    backends.drop()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def module_backend(request, module_backends: ModuleBackends) -> Backend:
    """A database of each kind shared by the tests of one module."""
    return module_backends.get(request.param)
