"""Picking up work an embedded process left behind: in the embedded mode queued trials live
only in the process's pool, so a restart finds them still queued (or half run) in the database.
"""

from __future__ import annotations

from evals_app.models import Trial
from runner.jobs.dispatch import enqueue
from runner.jobs.recorder import reset_for_retry


def requeue_unfinished() -> int:
    """Reset trials left running, enqueue every unfinished trial; returns how many."""
    left_running = Trial.objects.filter(status=Trial.Status.RUNNING).select_related("run")
    for trial in left_running:
        reset_for_retry(trial)
    ids = list(
        Trial.objects.filter(status=Trial.Status.QUEUED).order_by("pk").values_list("pk", flat=True)
    )
    if ids:
        enqueue(ids)
    return len(ids)
