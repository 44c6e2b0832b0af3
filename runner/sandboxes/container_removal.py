"""Removing a destroyed docker sandbox's container off the trial's path.

A removal makes the engine kill the container, wait for it and tear down its file system and
namespaces: about as long as a step. So ``remove_later`` hands the container to one background
thread per process, and the trial goes on. The container stays listed with the process's
watchdog (``runner.sandboxes.containment``) until it is gone, so a process that dies first
still has it removed; a process that exits normally waits for the removals before it does.

A removal is done when the engine says the container is gone. The engine refuses a second
removal while one is under way (409, "removal of container … is already in progress": the
container's own auto-removal once its keep-alive ended, or another caller's), and that one may
still fail, so ``remove`` then waits for the container's end and asks again, up to
REMOVAL_CEILING_S.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from runner.sandboxes.containment import watch_container
from runner.sandboxes.engine import EngineError, engine_errors, unix_socket_path
from runner.sandboxes.off_the_path import OffThePath

if TYPE_CHECKING:
    from docker.models.containers import Container

log = logging.getLogger(__name__)

# How long a removal may take before Proctor gives up on it: a removal takes the engine about
# as long as a step, and seconds on a loaded machine.
REMOVAL_CEILING_S = 120.0
# The pause before asking again when waiting for a removal failed at once (not by its timeout).
RETRY_PAUSE_S = 0.5


def remove(container: Container) -> bool:
    """Remove ``container``, returning once the engine says it is gone (True), or once the
    removal failed or the container was still there REMOVAL_CEILING_S later (False, said in one
    line on the log). Blocks: see ``remove_later``."""
    deadline = time.monotonic() + REMOVAL_CEILING_S
    short_id = container.id[:12]
    while True:
        try:
            with engine_errors():
                container.remove(force=True, v=True)
            return True  # the engine answers once this removal is done
        except (EngineError, OSError) as exc:
            # OSError: the connection's socket failed under the client, past what requests
            # turns into its own errors.
            if isinstance(exc, EngineError) and exc.status == 404:
                return True  # gone already
            if not isinstance(exc, EngineError) or exc.status != 409:
                log.warning("could not remove docker sandbox container %s: %s", short_id, exc)
                return False
        # 409: another removal is under way. Wait for the container's end, then ask again (the
        # other removal may have failed, and then this one does it).
        left = deadline - time.monotonic()
        if left <= 0:
            log.warning(
                "docker sandbox container %s was still being removed after %.0f s; gave up "
                "waiting (the watchdog removes it when this process ends)",
                short_id,
                REMOVAL_CEILING_S,
            )
            return False
        try:
            with engine_errors():
                container.wait(condition="removed", timeout=left)
        except (EngineError, OSError) as exc:
            if isinstance(exc, EngineError) and exc.status == 404:
                return True  # gone before the wait began
            if not isinstance(exc, EngineError) or exc.status != 0:
                # Not the wait's timeout: an engine or socket error, so a pause first.
                time.sleep(min(RETRY_PAUSE_S, max(deadline - time.monotonic(), 0)))


def _remove(container: Container) -> None:
    if not remove(container):
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
