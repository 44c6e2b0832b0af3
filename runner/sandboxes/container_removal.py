"""Removing a destroyed docker sandbox's container off the trial's path.

A removal makes the engine kill the container, wait for it and tear down its file system and
namespaces: about as long as a step. So ``remove_later`` hands the container to one background
thread per process, and the trial goes on. The container stays listed with the process's
watchdog (``runner.sandboxes.containment``) until it is gone, so a process that dies first
still has it removed; a process that exits normally waits for the removals before it does.
"""

from __future__ import annotations

import logging

from runner.sandboxes.containment import watch_container
from runner.sandboxes.engine import Engine, EngineError
from runner.sandboxes.off_the_path import OffThePath

log = logging.getLogger(__name__)


def _remove(removal: tuple[Engine, str]) -> None:
    engine, container_id = removal
    try:
        engine.call("DELETE", f"/containers/{container_id}?force=1&v=1")
    except EngineError as exc:
        # 404: auto-removed already; 409: a removal already in progress.
        if exc.status not in (404, 409):
            log.warning("could not remove docker sandbox container %s: %s", container_id[:12], exc)
            return  # still listed: the watchdog tries again when this process ends
    if engine.socket_path:
        watch_container(engine.socket_path, container_id, done=True)


_removals: OffThePath[tuple[Engine, str]] = OffThePath("proctor-container-remover", _remove)


def remove_later(engine: Engine, container_id: str) -> None:
    """Remove the container ``container_id`` in the background (see the module's docstring)."""
    _removals.put((engine, container_id))


def wait_for_removals() -> None:
    """Block until every container a destroyed docker sandbox left is removed."""
    _removals.join()
