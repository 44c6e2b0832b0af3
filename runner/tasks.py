"""Celery tasks: thin wrappers that take ids and call plain, separately tested functions."""

from __future__ import annotations

from celery import shared_task

from runner.execution import run_trial_by_id


@shared_task(name="proctor.run_trial", acks_late=True, ignore_result=True)
def run_trial(trial_id: int) -> str | None:
    return run_trial_by_id(trial_id)
