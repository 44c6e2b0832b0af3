"""Celery tasks: thin wrappers that take ids and call plain, separately tested functions."""

from __future__ import annotations

# The project's app, not Celery's default: a web process that never imported it would send
# tasks to amqp://localhost instead of the configured Redis broker.
from proctor.celery import app
from runner.jobs.execution import run_trial_by_id


@app.task(name="proctor.run_trial", acks_late=True, ignore_result=True)
def run_trial(trial_id: int) -> str | None:
    return run_trial_by_id(trial_id)
