"""Picking up work an embedded process left behind: in the embedded mode queued trials live
only in the process's pool, so a restart finds them still queued (or half run) in the database.

Only work nobody owns is taken: queued trials, and running trials whose lease expired (their
process died). A trial a live `proctor eval` runs keeps a fresh lease and is left to it.
"""

from __future__ import annotations

from evals_app.models import Trial
from runner.jobs import reaper
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
