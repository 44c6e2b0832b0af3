"""The one way work starts: ``enqueue``.

With ``REDIS_URL`` each trial is a Celery task on the broker, for ``proctor worker`` processes
anywhere. Without it (the embedded default) the same task runs in this process's local pool,
so nothing external is needed and queued work still goes through the same code. The local pool
is threads (`proctor serve`, `-j 1`) or forked worker processes (`proctor eval -j N`:
``runner.jobs.trial_processes``); either hands back futures, so waiting on it is the same.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from concurrent.futures import BrokenExecutor, Executor, Future, ThreadPoolExecutor, wait
from urllib.parse import urlsplit

from django.conf import settings
from django.db import close_old_connections, connections

from evals_app.models import Trial, UnsentTrial
from runner.jobs import trial_processes
from runner.jobs.execution import run_trial_by_id
from runner.jobs.pool_size import default_concurrency
from runner.jobs.trial_processes import WorkerPool, in_worker

log = logging.getLogger(__name__)

# The Celery task a trial is (runner.jobs.tasks.run_trial).
RUN_TRIAL = "proctor.run_trial"

_pool: Executor | None = None
_pool_size = 0
_pool_of_processes = False
_pool_lock = threading.Lock()
# The pool's work not yet done, so a stopping process knows what still runs.
_pending: set[Future] = set()
# Set once the process is stopping: work queued after it stays queued in the database.
_stopped = False
# Signalled each time a local task ends, for whoever waits on the batch (`proctor eval`).
_ended = threading.Condition(_pool_lock)
_ended_count = 0
# The count at which the waiter (`proctor eval`) wants to wake; None: nobody waits on a count.
_wake_at: int | None = None


def configure_local_workers(size: int, *, processes: bool = False) -> None:
    """Size the embedded pool (``proctor eval -j N``); takes effect for work queued after.
    ``processes``: forked worker processes (started now) where this process can fork them,
    else threads. A pool of processes lasts until ``release_local_workers``."""
    global _pool, _pool_size, _pool_of_processes
    processes = processes and trial_processes.can_fork_workers()
    with _pool_lock:
        if _pool is not None and _pool_size == size and _pool_of_processes == processes:
            return
        old, _pool = _pool, None
    if old is not None:
        old.shutdown(wait=False)
    pool: Executor | None = (
        trial_processes.start_workers(size, _run_locally, enqueue) if processes else None
    )
    processes = pool is not None
    if pool is None:
        pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="proctor-trial")
    with _pool_lock:
        _pool, _pool_size, _pool_of_processes = pool, size, processes


def release_local_workers(*, interrupted: bool = False) -> None:
    """The end of `proctor eval`: worker processes finish what they hold and exit, their exit
    work done (live messages sent, spare folders deleted) and their CPU time counted as this
    process's children's. A pool of threads is kept for the next batch of this process.

    ``interrupted`` (Ctrl-C): nothing queued starts any more; worker processes are ended at
    once with their trials (their watchdogs end the agents), and a pool of threads is let go
    with its queue cancelled (a running trial ends once it finds its lease gone)."""
    global _pool
    with _pool_lock:
        if _pool is None or not (_pool_of_processes or interrupted):
            return
        pool, _pool = _pool, None
    if not interrupted:
        pool.shutdown(wait=True)
    elif isinstance(pool, WorkerPool):
        pool.terminate()
    else:
        pool.shutdown(wait=False, cancel_futures=True)


def _local_pool() -> Executor:
    if _pool is None:
        configure_local_workers(default_concurrency())
    assert _pool is not None
    return _pool


def _run_locally(trial_id: int) -> None:
    # The task's own function, without Celery's tracing around it: the task is a thin wrapper
    # (runner.jobs.tasks), and its per-call machinery cost more than a no-op trial's queries.
    # A pool thread keeps its SQLite connection from one trial to the next (opening one costs
    # more than a no-op trial's own queries, and it holds no lock between statements); its
    # PostgreSQL connection is closed after each task, so none outlives the pool's work. A
    # worker process keeps either: it ends with the batch, and its connections with it.
    keep = in_worker() or connections["default"].vendor == "sqlite"
    if not keep:
        close_old_connections()
    try:
        run_trial_by_id(trial_id, trial_processes.hand_to_parent if in_worker() else enqueue)
    except Exception:
        log.exception("trial %s could not be run", trial_id)
        raise
    finally:
        if not keep:
            connections.close_all()
        else:
            _drop_broken_connections()


def _drop_broken_connections() -> None:
    """A kept connection that saw an error and no longer answers (a restarted server) is
    closed, so the next trial opens a new one instead of failing on it. This is the error half
    of Django's ``close_if_unusable_or_obsolete``; its other half would close every kept
    connection, as ``CONN_MAX_AGE`` is 0."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and connection.errors_occurred:
            if connection.is_usable():
                connection.errors_occurred = False
            else:
                connection.close()


def require_broker() -> None:
    """In the scaled mode, reach the broker once before a batch is recorded, or raise a
    CommandError of one sentence: its trials would be queued there, and an unreachable Redis
    ended ``proctor eval`` in kombu's traceback with the batch recorded and never queued."""
    if settings.EMBEDDED:
        return
    import redis
    from django.core.management import CommandError

    address = urlsplit(settings.REDIS_URL)
    where = f"{address.hostname}:{address.port or 6379}" if address.hostname else "its socket"
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=5, socket_timeout=5).ping()
    except (redis.exceptions.RedisError, OSError) as exc:
        raise CommandError(
            f"cannot queue trials on Redis at {where} (REDIS_URL: {exc}); start it, or unset "
            "REDIS_URL to run the trials in this process",
            returncode=2,
        ) from None


def enqueue(trial_ids: Iterable[int]) -> list[Future] | None:
    """Start these trials: on the broker in scaled mode, in the local pool otherwise. Once the
    local pool is stopping (``stop_local_workers``) they stay queued for the next start."""
    ids = list(trial_ids)
    if not settings.EMBEDDED:
        send_to_broker(ids)
        return None
    with _pool_lock:
        if _stopped:
            return []
    pool = _local_pool()
    try:
        futures = [pool.submit(_run_locally, trial_id) for trial_id in ids]
    except BrokenExecutor:
        pool = _replace_broken(pool)
        futures = [pool.submit(_run_locally, trial_id) for trial_id in ids]
    with _pool_lock:
        _pending.update(futures)
    for future in futures:
        future.add_done_callback(_forget)
    return futures


def send_to_broker(ids: list[int]) -> str | None:
    """Send these trials' messages to the broker (the scaled mode) and clear them from the
    outbox (``UnsentTrial``); None, or the sentence saying why the broker took none or only
    some. Never raises for a broker that is down: the trials stay queued in the outbox, and the
    reaper sends them once it is back (``resend_unsent``)."""
    # Celery is loaded only in the scaled mode (start-up time), and the task is sent by its
    # name (runner.jobs.tasks.run_trial), which needs nothing of the worker's side.
    from proctor.site.celery import app

    sent = 0
    problem = None
    try:
        for trial_id in ids:
            # No retries of its own: the first failure stops the sending (each retry of each
            # trial would wait for a dead Redis), and the reaper retries them all.
            app.send_task(RUN_TRIAL, args=[trial_id], retry=False)
            sent += 1
    except Exception as exc:  # kombu's OperationalError, redis-py's errors, an OSError
        problem = broker_down(exc)
        log.warning("%s: %d trials wait in the outbox for it", problem, len(ids) - sent)
        UnsentTrial.objects.bulk_create(
            [UnsentTrial(trial_id=trial_id) for trial_id in ids[sent:]],
            batch_size=5000,
            ignore_conflicts=True,
        )
    for start in range(0, sent, 5000):
        UnsentTrial.objects.filter(trial_id__in=ids[start : min(sent, start + 5000)]).delete()
    return problem


def broker_down(exc: BaseException) -> str:
    """One sentence for a broker that refused a message."""
    address = urlsplit(settings.REDIS_URL)
    where = f"{address.hostname}:{address.port or 6379}" if address.hostname else "its socket"
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"Redis at {where} is unreachable ({reason}); the trials start once it is back"


def resend_unsent(*, older_than_s: float, limit: int = 5000) -> list[int]:
    """Send the outbox's trials that waited longer than ``older_than_s`` (a sender that is
    still at work is given that long) and are still queued; forget the rest. Returns the ids
    sent. Rows another process's reaper holds are skipped (PostgreSQL)."""
    from datetime import timedelta

    from django.db import transaction
    from django.utils import timezone

    before = timezone.now() - timedelta(seconds=older_than_s)
    with transaction.atomic():
        rows = list(
            UnsentTrial.objects.select_for_update(skip_locked=True)
            .filter(since__lt=before)
            .order_by("trial_id")
            .values_list("trial_id", "trial__status")[:limit]
        )
        if not rows:
            return []
        done = [trial_id for trial_id, status in rows if status != Trial.Status.QUEUED]
        UnsentTrial.objects.filter(trial_id__in=done).delete()
        queued = [trial_id for trial_id, status in rows if status == Trial.Status.QUEUED]
        problem = send_to_broker(queued) if queued else None
    return [] if problem else queued


def _replace_broken(broken: Executor) -> Executor:
    """A pool of processes breaks when a worker dies (killed, out of memory), and ends every
    other worker with it. What runs after (the trials that never started, those the reaper
    re-queues once the dead workers' leases lapse) runs in threads of this process: forking
    again from whichever thread noticed would not be safe."""
    global _pool, _pool_of_processes
    log.warning("a trial worker process died; the batch's remaining trials run in threads")
    with _pool_lock:
        if _pool is broken or _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=_pool_size or 1, thread_name_prefix="proctor-trial"
            )
            _pool_of_processes = False
        return _pool


def _forget(future: Future) -> None:
    global _ended_count
    with _pool_lock:
        _pending.discard(future)
        _ended_count += 1
        if _wake_at is not None and _ended_count >= _wake_at:
            _ended.notify_all()


def pending_count() -> int:
    """How many local tasks are queued or running in this process's pool (those a trial's end
    queued included)."""
    with _pool_lock:
        return len(_pending)


def ended_count() -> int:
    """How many local tasks have ended so far (a base for ``wait_until_ended``)."""
    with _pool_lock:
        return _ended_count


def wait_until_ended(count: int | None, timeout_s: float) -> int:
    """Block until ``count`` local tasks have ended in all (None: for ``timeout_s`` alone); the
    count now. Lets a waiter react to the last trial's end at once instead of polling the
    database, without waking it for every trial before."""
    global _wake_at
    with _pool_lock:
        _wake_at = count
        try:
            _ended.wait_for(lambda: count is not None and _ended_count >= count, timeout_s)
        finally:
            _wake_at = None
        return _ended_count


def stop_local_workers(grace_s: float) -> int:
    """Stop the embedded pool (a stopping `proctor serve`): trials queued but not started are
    dropped from it, so they stay ``queued`` in the database for the next start; running ones
    get ``grace_s`` seconds to finish. Returns how many still run after that (the caller hands
    their trials back). Blocks up to ``grace_s``."""
    global _pool, _stopped
    with _pool_lock:
        _stopped = True
        pool, _pool = _pool, None
        pending = set(_pending)
    if pool is None:
        return 0
    # Cancelling before the interpreter exits: left queued in the pool, each trial would start
    # during shutdown and break on the first thread it needs ("cannot schedule new futures").
    pool.shutdown(wait=False, cancel_futures=True)
    running = [future for future in pending if not future.done()]
    _, not_done = wait(running, timeout=grace_s)
    return len(not_done)


def _forget_in_child() -> None:
    """A forked child (a trial worker, a validator) has no local pool of its own until it makes
    one: the parent's threads and futures did not come along, nor, safely, its lock."""
    global _pool, _pool_size, _pool_of_processes, _pool_lock, _ended, _ended_count, _stopped
    global _wake_at
    _pool, _pool_size, _pool_of_processes, _stopped = None, 0, False, False
    _pool_lock = threading.Lock()
    _ended, _ended_count, _wake_at = threading.Condition(_pool_lock), 0, None
    _pending.clear()


os.register_at_fork(after_in_child=_forget_in_child)
