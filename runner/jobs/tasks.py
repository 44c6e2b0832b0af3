"""Celery tasks: thin wrappers that take ids and call plain, separately tested functions."""

from __future__ import annotations

from celery.signals import worker_ready

# The project's app, not Celery's default: a web process that never imported it would send
# tasks to amqp://localhost instead of the configured Redis broker.
from proctor.site.celery import app
from runner.jobs import reaper
from runner.jobs.dispatch import RUN_TRIAL, enqueue
from runner.jobs.execution import run_trial_by_id


# acks_late with reject_on_worker_lost: a message is acknowledged only once its trial ended,
# so a worker that dies mid-trial hands it back; the trial's lease (not the message) decides
# whether a redelivery runs it again.
@app.task(name=RUN_TRIAL, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_trial(trial_id: int) -> str | None:
    return run_trial_by_id(trial_id, enqueue)


@worker_ready.connect
def start_reaper(**_) -> None:
    """Every worker (`proctor worker` or `celery -A proctor.site worker`) also reaps lost trials."""
    reaper.start()
