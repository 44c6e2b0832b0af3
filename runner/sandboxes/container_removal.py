"""Removing a destroyed docker sandbox's container off the trial's path.

A removal makes the engine kill the container, wait for it and tear down its file system and
namespaces: about as long as a step. So ``remove_later`` hands the container to one background
thread per process, and the trial goes on. The container stays listed with the process's
watchdog (``runner.sandboxes.containment``) until it is gone, so a process that dies first
still has it removed; a process that exits normally waits for the removals before it does.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from runner.sandboxes.containment import watch_container
from runner.sandboxes.engine import EngineError, engine_errors, unix_socket_path
from runner.sandboxes.off_the_path import OffThePath

if TYPE_CHECKING:
    from docker.models.containers import Container

log = logging.getLogger(__name__)


def _remove(container: Container) -> None:
    try:
        with engine_errors():
            container.remove(force=True, v=True)
    except EngineError as exc:
        # 404: auto-removed already; 409: a removal already in progress.
        if exc.status not in (404, 409):
            log.warning("could not remove docker sandbox container %s: %s", container.id[:12], exc)
            return  # still listed: the watchdog tries again when this process ends
    if socket_path := unix_socket_path(container.client):
        watch_container(socket_path, container.id, done=True)


_removals: OffThePath[Container] = OffThePath("proctor-container-remover", _remove)


def remove_later(container: Container) -> None:
    """Remove ``container`` in the background (see the module's docstring)."""
    _removals.put(container)


def wait_for_removals() -> None:
    """Block until every container a destroyed docker sandbox left is removed."""
    _removals.join()
