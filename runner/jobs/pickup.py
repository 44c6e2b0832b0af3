"""Picking up work an embedded process left behind: in the embedded mode queued trials live
only in the process's pool, so a restart finds them still queued (or half run) in the database.

Only work nobody owns is taken: queued trials, and running trials whose lease expired (their
process died). A trial a live `proctor eval` runs keeps a fresh lease and is left to it.
"""

from __future__ import annotations

from evals_app.models import Trial
from runner.jobs import leases, reaper
from runner.jobs.dispatch import enqueue


def requeue_unfinished() -> int:
    """Re-queue (or end, once their attempts are spent) the running trials whose lease expired,
    and enqueue every queued trial; returns how many were enqueued."""
    requeued, _ = reaper.reap()
    ids = list(
        Trial.objects.filter(status=Trial.Status.QUEUED)
        .exclude(pk__in=requeued)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if ids:
        enqueue(ids)
    return len(ids) + len(requeued)


def hand_back_running() -> list[int]:
    """Give back the trials this process still runs as it stops: each is queued again with its
    partial record forgotten and its lease released (the attempt is not counted: no worker was
    lost), so the next start runs it. The runs themselves end with the process (their
    processes with its watchdog); anything they record after this is refused by the lease."""
    owner = leases.owner()
    given: list[int] = []
    for trial in (
        Trial.objects.filter(pk__in=list(leases.held())).held_by(owner).select_related("run")
    ):
        trial.reset()
        reaper.queued_again(trial)
        given.append(trial.pk)
    return given
