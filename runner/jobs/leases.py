"""Who runs a trial: this process's identity, the leases it holds, and the heartbeat that keeps
them fresh.

A trial is claimed under a lease (``Trial.claim``) that expires PROCTOR_LEASE_S after it was
last renewed. One heartbeat thread per process renews the leases of every trial the process is
running, in one UPDATE every PROCTOR_LEASE_S / 3 seconds, so a live process never loses a trial
and a dead one (SIGKILL, a lost machine) lets its leases lapse for the reaper to find.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator

from django.conf import settings
from django.db import connection

from evals_app.models import Trial

log = logging.getLogger(__name__)

_lock = threading.Lock()
_held: set[int] = set()
# What to call when a held trial's lease turns out taken over (the recorder's ``lease_lost``).
_on_lost: dict[int, Callable[[], None]] = {}
_identity: tuple[int, str] | None = None
_heartbeat: threading.Thread | None = None


def _forget_in_child() -> None:
    """A forked child holds no lease: the parent's trials and heartbeat stay the parent's, and
    the child is a lease owner of its own (``owner`` sees the new pid)."""
    global _lock, _heartbeat
    _lock, _heartbeat = threading.Lock(), None
    _held.clear()
    _on_lost.clear()


os.register_at_fork(after_in_child=_forget_in_child)


def owner() -> str:
    """This process's identity as a lease owner: host:pid:random (the random part tells a
    restarted process that reused a pid from the one before)."""
    global _identity
    with _lock:
        if _identity is None or _identity[0] != os.getpid():
            _identity = (
                os.getpid(),
                f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}",
            )
        return _identity[1]


def held() -> set[int]:
    """The trials this process is running now."""
    with _lock:
        return set(_held)


@contextlib.contextmanager
def holding(trial_id: int, on_lost: Callable[[], None] | None = None) -> Iterator[None]:
    """Keep the lease of ``trial_id`` (already claimed by ``owner()``) fresh while the block
    runs; ``on_lost`` is called (from the heartbeat's thread) if another process took it."""
    with _lock:
        _held.add(trial_id)
        if on_lost is not None:
            _on_lost[trial_id] = on_lost
    _ensure_heartbeat()
    try:
        yield
    finally:
        with _lock:
            _held.discard(trial_id)
            _on_lost.pop(trial_id, None)


def renew_now() -> int:
    """Renew the leases of the trials this process runs (one UPDATE); how many it renewed.
    A trial whose lease another process holds now is told so (its ``on_lost``)."""
    ids = held()
    if not ids:
        return 0
    renewed = Trial.renew_leases(owner(), ids, lease_s=settings.PROCTOR_LEASE_S)
    if renewed < len(ids):
        ours = set(
            Trial.objects.filter(pk__in=list(ids)).held_by(owner()).values_list("pk", flat=True)
        )
        for trial_id in ids - ours:
            with _lock:
                callback = _on_lost.pop(trial_id, None)
            if callback is not None:
                callback()
    return renewed


def _ensure_heartbeat() -> None:
    global _heartbeat
    with _lock:
        if _heartbeat is not None:
            return
        _heartbeat = threading.Thread(target=_beat, name="proctor-heartbeat", daemon=True)
        _heartbeat.start()


def _beat() -> None:
    """Renew until the process holds no trial, then end (closing this thread's connection);
    the next claimed trial starts a new heartbeat."""
    global _heartbeat
    interval = settings.PROCTOR_LEASE_S / 3
    try:
        while True:
            time.sleep(interval)
            with _lock:
                if not _held:
                    _heartbeat = None
                    return
            try:
                renew_now()
            except Exception:  # a lost connection or a locked database: try again next beat
                log.warning("could not renew trial leases; retrying", exc_info=True)
                with contextlib.suppress(Exception):
                    connection.close()
    finally:
        with contextlib.suppress(Exception):
            connection.close()
