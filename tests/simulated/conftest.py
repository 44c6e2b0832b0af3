"""Fixtures of the simulated-user and assertion tests: a fake model endpoint playing the
simulated users and the judges, and `proctor` homes pointed at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import proctor_env
from e2e.running import Backend
from fakes.openai_server import FakeModelServer, fake_model_server_fixture  # noqa: F401

from simulated.model_roles import ModelRoles

MODEL = "fake-persona"


def model_env(server: FakeModelServer, **extra: str) -> dict[str, str]:
    """What a `proctor` subprocess needs to consult the fake server."""
    return {"PROCTOR_LLM_BASE_URL": server.url, "PROCTOR_LLM_MODEL": MODEL, **extra}


@pytest.fixture(scope="module")
def module_server() -> Iterator[FakeModelServer]:
    """One fake model server for a module whose tests read one shared batch."""
    with FakeModelServer() as server:
        yield server


@pytest.fixture(scope="module")
def module_roles(module_server: FakeModelServer) -> ModelRoles:
    return ModelRoles().install(module_server)


@pytest.fixture(scope="module")
def module_sqlite(tmp_path_factory, module_server: FakeModelServer) -> Backend:
    home = tmp_path_factory.mktemp("proctor-home")
    return Backend("sqlite", proctor_env(home, **model_env(module_server)))


@pytest.fixture
def roles(fake_model_server: FakeModelServer) -> ModelRoles:
    return ModelRoles().install(fake_model_server)


@pytest.fixture
def sqlite_home(tmp_path, fake_model_server: FakeModelServer) -> Backend:
    return Backend("sqlite", proctor_env(tmp_path / "proctor-home", **model_env(fake_model_server)))
