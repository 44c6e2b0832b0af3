"""The docker sandbox's client of the engine (the ``docker`` SDK): one per process, a forked
child's its own, and an engine that does not answer said in one sentence."""

from __future__ import annotations

import os

import pytest

from proctor import variant
from runner.sandboxes import SandboxError, create_sandbox, engine
from runner.sandboxes.docker import docker_problem
from sandboxes.conftest import require_kind


@pytest.mark.docker
def test_a_forked_child_makes_its_own_client_and_leaves_the_parents_alone() -> None:
    require_kind("docker")
    parent = engine.client()
    assert engine.client() is parent
    assert parent.ping()  # a connection now waits in its pool
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: says what it found, and exits without the parent's exit work
        try:
            child = engine.client()
            said = b"its own" if child is not parent and child.ping() else b"the parent's"
        except BaseException as exc:
            said = repr(exc).encode()
        os.write(write_end, said)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        said = answer.read()
    os.waitpid(pid, 0)
    assert said == b"its own"
    assert engine.client() is parent
    assert parent.ping()


def test_an_engine_that_does_not_answer_is_one_sentence(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    monkeypatch.setattr(engine, "_client", None)
    with pytest.raises(SandboxError) as raised:
        create_sandbox(variant("command", sandbox="docker"))
    said = str(raised.value)
    assert said.startswith("the docker sandbox is unavailable: no Docker engine answers (")
    assert "\n" not in said
    problem = docker_problem()
    assert problem is not None and problem.startswith("no Docker engine answers (")
