"""Local trials in worker processes of their own, for `proctor eval -j N` (N above 1).

A trial's own work in Proctor is Python: claiming it, its recorder, its sandbox and its final
transaction. In one process, the trials of a thread pool take turns with one interpreter lock
and hand it to each other around every system call, so a second thread overlaps its agent's
process with the other trial's Python but never runs Python beside it. Worker processes each
have their own lock, as `proctor worker` processes already do in the server mode.

The workers are forked from `proctor eval` once the batch is recorded, so they start in about a
millisecond with Django set up and the eval's modules imported. Before the fork everything
loaded is moved out of the cyclic collector's view (``gc.freeze``): a collection in a worker
would otherwise write to every object and so copy every page it shares with the parent. Every
module that keeps per-process state (a background thread, a lease, an inotify watch, spare
trial folders, a lock) forgets the parent's in the child through ``os.register_at_fork``; the
parent closes its database connections before the fork, as a connection cannot be shared by
two processes.

Each worker:

- dies with the parent (``PR_SET_PDEATHSIG``): a parent killed outright leaves no worker
  running trials nobody waits for; their leases lapse, as a killed `proctor eval`'s always did;
- ignores SIGINT, so Ctrl-C in a terminal (which signals the whole process group) reaches
  only `proctor eval`, which decides what happens to the trials, as it did with threads;
- runs at its exit the exit functions registered in it (a process forked by multiprocessing
  skips ``atexit``): the last live messages are sent and the spare trial folders deleted.

Where ``fork`` or ``memfd_create`` (the workers' shared board, Linux) is missing, or the
database lives in this process's memory (an in-memory SQLite database, as some test set-ups
use), trials run in threads as before.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import logging
import multiprocessing
import multiprocessing.util
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from django.conf import settings
from django.db import connections

from runner.sandboxes import sibling_trials
from runner.sandboxes.audit import watch_in_advance
from runner.sandboxes.sibling_trials import SiblingBoard

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1


def can_fork_workers() -> bool:
    """Whether trials can run in forked workers here."""
    if "fork" not in multiprocessing.get_all_start_methods() or not hasattr(os, "memfd_create"):
        return False
    return not any(
        connection.vendor == "sqlite" and connection.is_in_memory_db()  # type: ignore[attr-defined]  # the SQLite backend's own
        for connection in connections.all(initialized_only=False)
    )


class WorkerPool(ProcessPoolExecutor):
    """The forked workers, and the board on which they see each other's trials."""

    def __init__(self, size: int, board: SiblingBoard) -> None:
        super().__init__(
            max_workers=size,
            mp_context=multiprocessing.get_context("fork"),
            initializer=_worker_started,
            initargs=(os.getpid(), board),
        )
        self.board = board

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=wait, cancel_futures=cancel_futures)
        if wait:
            self.board.close()


def start_workers(size: int) -> WorkerPool | None:
    """``size`` worker processes, forked now rather than on the first trial, from this thread
    (a worker dies with the thread that forked it); None if they could not start."""
    connections.close_all()
    # Everything loaded so far out of the collector's view in the workers: a collection there
    # would write to every object's header and so copy every page the fork shares with this
    # process. This process hands its objects back to the collector once the workers exist.
    gc.freeze()
    pool = WorkerPool(size, SiblingBoard(size))
    try:
        # Forks every worker (the fork start method starts them all on the first submit).
        pool.submit(int).result()
    except BrokenProcessPool:
        log.warning("the trial workers could not start; trials run in threads instead")
        pool.shutdown(wait=True)
        return None
    finally:
        gc.unfreeze()
    return pool


# Whether this process is a trial worker (set at its start).
_is_worker = False


def in_worker() -> bool:
    return _is_worker


def _worker_started(parent: int, board: SiblingBoard) -> None:
    global _is_worker
    _is_worker = True
    _die_with_parent(parent)
    board.join()
    sibling_trials.board = board
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The parent's exit functions are the parent's: the worker's own are registered from here
    # on (each module registers its exit work on first use in a process), and run at its exit.
    atexit._clear()
    multiprocessing.util.Finalize(None, atexit._run_exitfuncs, exitpriority=100)
    # The write audit's watch walks the audited folders once per process: begun now, it is
    # usually ready by the first agent, whose audit would otherwise walk them with `find`.
    # The folders left out are the ones each trial names (runner.jobs.execution).
    watch_in_advance(
        ignore=[str(settings.PROCTOR_HOME), str(settings.ARTIFACTS_DIR), str(settings.CACHE_DIR)]
    )


def _die_with_parent(parent: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request above was made
        os._exit(1)
