"""Sandboxes of every kind for the tests, and a server on the host's loopback to call.

A kind whose tool is missing here (bubblewrap, a Docker engine or its base image) skips its
tests through the tier mechanism, or fails them when every tier is required.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest
from conftest import tier_unavailable

from proctor import variant
from runner.sandboxes import Sandbox, create_sandbox
from runner.sandboxes.bwrap import bwrap_problem
from runner.sandboxes.docker import DEFAULT_IMAGE, docker_problem

KINDS = ["local", "bwrap", pytest.param("docker", marks=pytest.mark.docker)]
CONFINED_KINDS = ["bwrap", pytest.param("docker", marks=pytest.mark.docker)]


def require_kind(kind: str) -> None:
    """Skip (or fail, when every tier is required) unless ``kind`` can run here."""
    if kind == "bwrap" and (problem := bwrap_problem()):
        tier_unavailable("bwrap", problem)
    if kind == "docker" and (problem := docker_problem(DEFAULT_IMAGE)):
        tier_unavailable("docker", problem)


@pytest.fixture
def open_sandbox() -> Iterator[Callable[..., Sandbox]]:
    """Creates sandboxes like a trial does (``open_sandbox("bwrap", network=True)``), and
    destroys whatever a test left."""
    opened: list[Sandbox] = []

    def open_one(kind: str, **settings) -> Sandbox:
        require_kind(kind)
        box = create_sandbox(variant("command", sandbox=kind, **settings))
        opened.append(box)
        return box

    yield open_one
    for box in opened:
        box.destroy()


@pytest.fixture(params=KINDS)
def sandbox(request, open_sandbox) -> Sandbox:
    return open_sandbox(request.param)


@pytest.fixture(params=CONFINED_KINDS)
def confined_kind(request) -> str:
    require_kind(request.param)
    return request.param


class LoopbackServer:
    """A TCP server on 127.0.0.1 of the host that counts the connections it accepts."""

    def __init__(self) -> None:
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.sendall(b"hello from the host\n")
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.listener.close()


@pytest.fixture
def loopback_server() -> Iterator[LoopbackServer]:
    server = LoopbackServer()
    yield server
    server.close()
