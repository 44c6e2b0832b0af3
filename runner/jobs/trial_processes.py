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
- does nothing on SIGINT or SIGHUP, so Ctrl-C in a terminal, or closing it (each signals the
  whole process group), acts only through `proctor eval`, which decides what happens to the
  trials, as it did with threads; the agents it starts get both signals' default actions, as
  they do from a thread;
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
import select
import signal
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from django.conf import settings
from django.db import connections

from runner.sandboxes import sibling_trials
from runner.sandboxes.audit import watch_in_advance
from runner.sandboxes.sibling_trials import SiblingBoard

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1

# A task on the shared pipe: its number and the function's one integer argument (a trial id).
# Every record has this size and is written whole, so each read of it by one worker takes
# exactly one task, whichever worker reads.
_TASK = struct.Struct("=qq")
# A result: the task's number, and the length of the error text that follows (0: it returned).
_RESULT = struct.Struct("=qq")
# Written once by each worker when it is ready for tasks.
_READY = -1
# A trial a worker's trial queued (an adaptive batch's next trial), its id in place of the
# error's length: the parent starts it (a worker has no pool of its own to start it in).
_QUEUED = -2
# An error's text is cut to fit one write the kernel keeps whole (PIPE_BUF).
_ERROR_BYTES = select.PIPE_BUF - _RESULT.size


def can_fork_workers() -> bool:
    """Whether trials can run in forked workers here."""
    if "fork" not in multiprocessing.get_all_start_methods() or not hasattr(os, "memfd_create"):
        return False
    return not any(
        connection.vendor == "sqlite" and connection.is_in_memory_db()  # type: ignore[attr-defined]  # the SQLite backend's own
        for connection in connections.all(initialized_only=False)
    )


class WorkerPool(Executor):
    """Forked workers that run one function, each taking the next task from one pipe.

    Python's ``ProcessPoolExecutor`` pickles every task and result and moves each through a
    feeder thread and a manager thread: about 0.25 ms of CPU per trial, parent and worker
    together, three thread wake-ups in the parent. Here a task is 16 bytes on a pipe that every
    worker reads, and a result 16 bytes (and an error's text) on a pipe that one thread of the
    parent reads, which also starts the next task; the parent keeps ``size`` tasks on the pipe
    at most, so the rest can still be cancelled. A worker that dies breaks the pool as it
    breaks Python's: every task not done fails with ``BrokenProcessPool``, the other workers
    are ended, and ``submit`` refuses more.
    """

    def __init__(
        self,
        size: int,
        board: SiblingBoard,
        run: Callable[[int], Any],
        queued: Callable[[list[int]], Any] | None = None,
    ) -> None:
        self.board = board
        self._run = run
        self._queued = queued
        self._size = size
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._futures: dict[int, Future] = {}
        self._waiting: deque[tuple[int, int]] = deque()  # (task, argument), not on the pipe yet
        self._on_pipe = 0
        self._next_task = 0
        self._broken = False
        self._closing = False
        self._ready = 0
        self._joined = False
        tasks_r, self._tasks_w = os.pipe()
        self._results_r, results_w = os.pipe()
        context = multiprocessing.get_context("fork")
        self._processes = [
            context.Process(
                target=_worker_main,
                args=(os.getpid(), board, tasks_r, self._tasks_w, results_w, self._results_r, run),
                name=f"proctor-trial-worker-{n}",
            )
            for n in range(size)
        ]
        try:
            for process in self._processes:
                process.start()
        finally:
            # The workers hold these ends now: the results pipe reads as ended once they exit.
            os.close(tasks_r)
            os.close(results_w)
        self._collector = threading.Thread(
            target=self._collect, name="proctor-trial-results", daemon=True
        )
        self._collector.start()
        # An exit that skipped ``shutdown`` (an error on the way out) still lets the workers
        # finish their trials and exit: multiprocessing waits for them after this has run.
        atexit.register(self._close_tasks)

    def wait_ready(self) -> bool:
        """Whether every worker started (False: one died first, and the pool is broken)."""
        with self._lock:
            self._idle.wait_for(lambda: self._ready == self._size or self._broken)
            return not self._broken

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        if fn is not self._run or kwargs or len(args) != 1 or not isinstance(args[0], int):
            raise TypeError("a worker pool runs its one function on one trial id")
        future: Future = Future()
        with self._lock:
            if self._broken:
                raise BrokenProcessPool("a trial worker process died")
            if self._closing:
                raise RuntimeError("cannot schedule new futures after shutdown")
            task, self._next_task = self._next_task, self._next_task + 1
            self._futures[task] = future
            self._waiting.append((task, args[0]))
            self._fill_pipe()
        return future

    def _fill_pipe(self) -> None:
        """Puts waiting tasks on the pipe until each worker has one (lock held)."""
        records = []
        while self._waiting and self._on_pipe < self._size:
            task, argument = self._waiting.popleft()
            if self._futures[task].set_running_or_notify_cancel():
                records.append(_TASK.pack(task, argument))
                self._on_pipe += 1
            else:
                del self._futures[task]
        if records:
            _write_all(self._tasks_w, b"".join(records))
        if self._closing and not self._waiting:
            self._close_tasks()

    def _close_tasks(self) -> None:
        """No task comes after the ones on the pipe: each worker exits when it reads the end."""
        if self._tasks_w >= 0:
            os.close(self._tasks_w)
            self._tasks_w = -1

    def _collect(self) -> None:
        poller = select.poll()
        poller.register(self._results_r, select.POLLIN)
        sentinels = {process.sentinel: process for process in self._processes}
        for sentinel in sentinels:
            poller.register(sentinel, select.POLLIN)
        pending = b""
        while sentinels or self._results_r >= 0:
            # Results first: a worker's last results are read before its death is noticed.
            for fd, _ in sorted(poller.poll(), key=lambda event: event[0] in sentinels):
                if fd in sentinels:
                    poller.unregister(fd)
                    process = sentinels.pop(fd)
                    process.join()
                    if not self._closing or process.exitcode:
                        self._break(f"a trial worker process died (exit {process.exitcode})")
                    continue
                data = os.read(self._results_r, 65536)
                if not data:
                    poller.unregister(fd)
                    os.close(self._results_r)
                    self._results_r = -1
                    continue
                pending = self._results(pending + data)
        if self._futures:
            self._break("the trial workers exited before their trials ended")

    def _results(self, data: bytes) -> bytes:
        """Settles the futures of the whole results in ``data``; returns what is left of it.
        Trials the workers queued are handed on first, so their work is pending before the
        task that queued them is seen to end."""
        settled: list[tuple[Future, BaseException | None]] = []
        queued: list[int] = []
        offset = 0
        with self._lock:
            while len(data) - offset >= _RESULT.size:
                task, error_bytes = _RESULT.unpack_from(data, offset)
                if task == _QUEUED:
                    queued.append(error_bytes)
                    offset += _RESULT.size
                    continue
                if len(data) - offset - _RESULT.size < error_bytes:
                    break
                start = offset + _RESULT.size
                error = data[start : start + error_bytes].decode("utf-8", "replace")
                offset = start + error_bytes
                if task == _READY:
                    self._ready += 1
                    self._idle.notify_all()
                    continue
                self._on_pipe -= 1
                future = self._futures.pop(task, None)
                if future is not None:
                    settled.append((future, RuntimeError(error) if error_bytes else None))
            self._fill_pipe()
            if not self._futures:
                self._idle.notify_all()
        if queued and self._queued is not None:
            try:
                self._queued(queued)
            except Exception:  # a pool shutting down: they stay queued in the database
                log.warning("could not start the queued trials %s", queued, exc_info=True)
        for future, exception in settled:
            if exception is None:
                future.set_result(None)
            else:
                future.set_exception(exception)
        return data[offset:]

    def _break(self, why: str) -> None:
        with self._lock:
            if self._broken:
                return
            self._broken = True
            unsettled = [f for f in self._futures.values() if not f.done()]
            self._futures.clear()
            self._waiting.clear()
            self._idle.notify_all()
        for process in self._processes:
            if process.is_alive():
                process.terminate()
        for future in unsettled:
            if not future.cancelled():
                future.set_exception(BrokenProcessPool(why))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closing = True
            if cancel_futures:
                for task, _ in self._waiting:
                    future = self._futures.pop(task)
                    future.cancel()
                self._waiting.clear()
            if not self._waiting or self._broken:
                self._close_tasks()
            if wait:
                self._idle.wait_for(lambda: not self._futures or self._broken)
        if wait and not self._joined:
            self._joined = True  # the board's descriptors are closed once, never a reused one
            self._collector.join()
            self.board.close()
            atexit.unregister(self._close_tasks)

    def terminate(self) -> None:
        """End the workers now, with the trials they run (Ctrl-C): nothing more starts, each
        worker's watchdog ends its agents, and what was not done fails."""
        with self._lock:
            self._closing = True
            self._close_tasks()
        self._break("the trial workers were ended")
        self.shutdown(wait=True)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def start_workers(
    size: int, run: Callable[[int], Any], queued: Callable[[list[int]], Any] | None = None
) -> WorkerPool | None:
    """``size`` worker processes that run ``run`` on the trial ids given to them, forked now
    rather than on the first trial, from this thread (a worker dies with the thread that
    forked it); None if they could not start. ``queued`` starts the trials a worker's trial
    queued (``hand_to_parent``)."""
    connections.close_all()
    # Everything loaded so far out of the collector's view in the workers: a collection there
    # would write to every object's header and so copy every page the fork shares with this
    # process. This process hands its objects back to the collector once the workers exist.
    gc.freeze()
    try:
        pool = WorkerPool(size, SiblingBoard(size), run, queued)
        if not pool.wait_ready():
            log.warning("the trial workers could not start; trials run in threads instead")
            pool.shutdown(wait=True)
            return None
    finally:
        gc.unfreeze()
    return pool


# Whether this process is a trial worker (set at its start), and its end of the results pipe.
_is_worker = False
_results_w = -1


def in_worker() -> bool:
    return _is_worker


def hand_to_parent(trial_ids: Iterable[int]) -> None:
    """In a worker: have the parent start these queued trials. Written before the task's own
    result, on the same pipe, so the parent has them before it sees the task end."""
    records = b"".join(_RESULT.pack(_QUEUED, t) for t in trial_ids)
    if records:
        _write_all(_results_w, records)


def _worker_main(
    parent: int,
    board: SiblingBoard,
    tasks_r: int,
    tasks_w: int,
    results_w: int,
    results_r: int,
    run: Callable[[int], Any],
) -> None:
    # The parent's ends: the tasks pipe must read as ended once the parent closes its end.
    global _results_w
    os.close(tasks_w)
    os.close(results_r)
    _results_w = results_w
    _worker_started(parent, board)
    os.write(results_w, _RESULT.pack(_READY, 0))
    while True:
        record = os.read(tasks_r, _TASK.size)
        if len(record) < _TASK.size:  # the pool is shutting down
            return
        task, argument = _TASK.unpack(record)
        error = b""
        try:
            run(argument)
        except Exception as exc:  # the trial's own record says what broke; the parent learns it
            error = f"{type(exc).__name__}: {exc}".encode()[:_ERROR_BYTES]
        os.write(results_w, _RESULT.pack(task, len(error)) + error)


def _worker_started(parent: int, board: SiblingBoard) -> None:
    global _is_worker
    _is_worker = True
    _die_with_parent(parent)
    board.join()
    sibling_trials.board = board
    # Ctrl-C and a closed terminal signal the whole process group: `proctor eval` decides what
    # happens to the trials, so here they do nothing. Caught rather than ignored, as a program
    # started from here inherits an ignored signal (and an agent's own Ctrl-C handling, or a
    # `kill -INT` of a server it started, would find it ignored), where a caught one is back at
    # its default in the program. One the command was started with ignored (`nohup`) stays
    # ignored, as in the command's own process. SIGTERM is how the parent ends a worker: its
    # default again, whatever handler the parent had when it forked.
    for number in (signal.SIGINT, signal.SIGHUP):
        if signal.getsignal(number) is not signal.SIG_IGN:
            signal.signal(number, _ignore_here)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
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


def _ignore_here(_signum: int, _frame: object) -> None:
    """A worker's handler of SIGINT and SIGHUP: nothing (see ``_worker_started``)."""


def _die_with_parent(parent: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request above was made
        os._exit(1)
