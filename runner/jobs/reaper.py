"""The reaper: finds running trials whose lease expired (their worker died) and re-queues each
once per attempt up to PROCTOR_MAX_ATTEMPTS, then ends it errored ``worker_lost``, so no trial
stays running forever and every batch finishes.

In the scaled mode it also empties the outbox: trials committed as queued whose message the
broker never took (Redis was down at the commit, or the sender died just after it) are sent
(``dispatch.resend_unsent``); a message sent twice still runs its trial once (``Trial.claim``).

It runs every PROCTOR_LEASE_S in every `proctor worker`, in `proctor serve` and in the embedded
pool of `proctor eval`. Several reapers at once are safe: the rows are locked (skipping those
another reaper holds) and a re-queued trial is claimed by exactly one task.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading

from django.conf import settings
from django.db import connection

from evals_app.models import Trial
from runner.jobs import artifact_paths, leases, publishing
from runner.jobs.dispatch import enqueue, resend_unsent
from runner.jobs.execution import finish_batch_if_done
from runner.sandboxes import SANDBOX_KINDS
from runner.sandboxes.leftovers import sweep_stale_folders

log = logging.getLogger(__name__)

_started: threading.Thread | None = None
_start_lock = threading.Lock()


def reap(*, batch_id: int | None = None) -> tuple[list[int], list[int]]:
    """One pass: (re-queued trial ids, trial ids ended worker_lost). Never takes a trial this
    process runs itself. Slow work (folders, enqueue, live updates) follows the commit."""
    requeued, ended = Trial.reap_expired(
        max_attempts=settings.PROCTOR_MAX_ATTEMPTS,
        exclude_ids=leases.held(),
        batch_id=batch_id,
    )
    for trial in [*requeued, *ended]:
        kill_remote_sandboxes(trial)
    for trial in requeued:
        queued_again(trial)
    for trial in ended:
        _publish(trial)
    if requeued or ended:
        # The dead worker's sandbox folders (on this machine, when it ran here).
        sweep_stale_folders()
    if requeued:
        ids = [trial.pk for trial in requeued]
        log.warning("re-queued trials %s: their worker stopped renewing its lease", ids)
        enqueue(ids)
    for batch in sorted({trial.run.batch_id for trial in ended}):
        finish_batch_if_done(batch, start=enqueue)
    if not settings.EMBEDDED:
        resent = resend_unsent(older_than_s=settings.PROCTOR_LEASE_S)
        if resent:
            log.warning("sent trials %s to the broker: it had not taken them", resent)
    return [t.pk for t in requeued], [t.pk for t in ended]


def kill_remote_sandboxes(trial: Trial) -> None:
    """Kill the sandboxes the lost run of ``trial`` had with a provider (its worker died with
    them running and paid for), then forget them. One that cannot be killed now stays listed
    and logged; the provider's own lifetime for it (the e2b kind sets one) ends it."""
    left = []
    for kind_name, remote_id in trial.remote_sandboxes:
        kind = SANDBOX_KINDS.get(kind_name)
        if kind is None:
            log.warning(
                "trial %s: no sandbox kind %r to kill %s with", trial.pk, kind_name, remote_id
            )
            continue
        try:
            kind.kill_remote(remote_id)
        except Exception as exc:
            log.warning(
                "trial %s: could not kill its %s sandbox %s: %s",
                trial.pk,
                kind_name,
                remote_id,
                exc,
            )
            left.append([kind_name, remote_id])
        else:
            log.warning("trial %s: killed its %s sandbox %s", trial.pk, kind_name, remote_id)
    if left != trial.remote_sandboxes:
        Trial.objects.filter(pk=trial.pk).update(remote_sandboxes=left)
        trial.remote_sandboxes = left


def queued_again(trial: Trial) -> None:
    """After ``trial`` was queued again (its worker lost, or its process handing it back):
    the lost run's files go, since the new run writes its own, and the pages learn of it."""
    shutil.rmtree(artifact_paths.trial_dir(trial.run.batch_id, trial.pk), ignore_errors=True)
    _publish(trial)


def _publish(trial: Trial) -> None:
    publishing.trial_changed(
        trial_id=trial.pk, run_id=trial.run_id, batch_id=trial.run.batch_id, status=trial.status
    )


def start(*, batch_id: int | None = None) -> None:
    """Run ``reap`` every PROCTOR_LEASE_S in a daemon thread of this process (once)."""
    global _started
    with _start_lock:
        if _started is not None and _started.is_alive():
            return
        _started = threading.Thread(
            target=_loop, kwargs={"batch_id": batch_id}, name="proctor-reaper", daemon=True
        )
        _started.start()


def _loop(batch_id: int | None) -> None:
    stop = threading.Event()
    while not stop.wait(settings.PROCTOR_LEASE_S):
        try:
            reap(batch_id=batch_id)
        except Exception:
            log.warning("the reaper could not check trial leases; retrying", exc_info=True)
            with contextlib.suppress(Exception):
                connection.close()
