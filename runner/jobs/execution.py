"""Running a queued trial from the database: claim it, rebuild its plan from the eval file
its case version came from, execute it, and close the batch when its last trial ends.

Idempotent: a trial that is not queued (already taken, or finished) is left alone, so a task
delivered twice runs the trial once.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from django.conf import settings
from django.db import OperationalError, transaction
from django.utils import timezone

from evals_app.loading import LoadError, load_file
from evals_app.models import Batch, Trial
from evals_app.resolution import canonical_hash, resolve_case, variant_spec
from runner.batches import benchmark
from runner.core.recording import TrialOutcome
from runner.core.trial import TrialPlan, execute_trial
from runner.jobs import publishing
from runner.jobs.recorder import DatabaseRecorder

log = logging.getLogger(__name__)


class PlanError(Exception):
    """The trial's definition can no longer be run as recorded; one sentence says why."""


def claim(trial_id: int) -> Trial | None:
    with transaction.atomic():
        trial = Trial.objects.select_for_update().filter(pk=trial_id).first()
        if trial is None or trial.status != Trial.Status.QUEUED:
            return None
        trial.status = Trial.Status.RUNNING
        trial.started_at = timezone.now()
        trial.save(update_fields=["status", "started_at"])
        Batch.objects.filter(pk=trial.run.batch_id, status=Batch.Status.QUEUED).update(
            status=Batch.Status.RUNNING
        )
    return Trial.objects.select_related(
        "run__case_version__case", "run__variant", "run__batch"
    ).get(pk=trial_id)


def build_plan(trial: Trial) -> TrialPlan:
    """Import the eval file again and find the exact case and variant this trial pinned."""
    version = trial.run.case_version
    definition = version.definition
    try:
        loaded = load_file(Path(version.module_path))
    except LoadError as exc:
        raise PlanError(str(exc.problems[0])) from None
    suite = next((s for s in loaded.suites if s.id == definition["suite"]), None)
    case = next((c for c in suite.cases if c.id == definition["case"]), None) if suite else None
    if suite is None or case is None:
        raise PlanError(
            f"{version.module_path} no longer defines case {definition['case']} of suite {definition['suite']}"
        )
    resolved = resolve_case(suite, case, loaded.path)
    if resolved.definition_hash != version.definition_hash:
        raise PlanError(
            f"case {case.id} changed in {version.module_path} since version {version.number} was recorded; "
            "run `proctor eval` to record and run the new version"
        )
    wanted = trial.run.variant.spec_hash
    variant = next((v for v in suite.variants if canonical_hash(variant_spec(v)) == wanted), None)
    if variant is None:
        raise PlanError(
            f"variant {trial.run.variant.name} is no longer defined by suite {suite.id} in {version.module_path}"
        )
    return TrialPlan(
        resolved=resolved,
        variant=variant,
        index=trial.index,
        cache_root=Path(settings.CACHE_DIR),
        git_host=settings.GIT_HOST,
        own_folders=(str(settings.PROCTOR_HOME), str(settings.ARTIFACTS_DIR)),
        responder_model=trial.run.batch.options.get("responder_model"),
        judge_model=trial.run.batch.options.get("judge_model"),
    )


def run_trial_by_id(trial_id: int) -> str | None:
    """Run one queued trial; returns its final status, or None when it was not queued.

    Whatever breaks on the way (the database included), the trial ends with a final status, so
    nobody waits forever on a trial left ``running``.
    """
    trial = claim(trial_id)
    if trial is None:
        return None
    try:
        recorder = DatabaseRecorder(trial)
        try:
            plan = build_plan(trial)
        except PlanError as exc:
            recorder.trial_started()
            recorder.trial_finished(
                TrialOutcome(status="errored", finish_reason="definition", error=str(exc))
            )
            status = "errored"
        else:
            status = execute_trial(plan, recorder).status
    except Exception as exc:
        log.exception("trial %s broke outside the runner's own error handling", trial_id)
        status = Trial.Status.ERRORED
        Trial.objects.filter(pk=trial_id).exclude(status__in=Trial.FINAL_STATUSES).update(
            status=status,
            finish_reason="internal error",
            error=f"{type(exc).__name__}: {exc}",
            finished_at=timezone.now(),
        )
        publishing.trial_changed(
            trial_id=trial_id, run_id=trial.run_id, batch_id=trial.run.batch_id, status=status
        )
    finish_batch_if_done(trial.run.batch_id)
    return status


def abandon_unfinished(batch: Batch, reason: str) -> int:
    """End the batch's trials that nobody will run any more as errored, saying why, and close
    the batch: no trial is left queued forever and the record stays readable."""
    left = Trial.objects.filter(run__batch=batch).exclude(status__in=Trial.FINAL_STATUSES)
    count = left.update(
        status=Trial.Status.ERRORED,
        finish_reason="not run",
        error=f"the worker could not run this trial: {reason}",
        finished_at=timezone.now(),
    )
    if count:
        finish_batch_if_done(batch.pk)
    return count


def finish_batch_if_done(batch_id: int) -> bool:
    """Mark the batch finished (and write benchmark.json) once no trial is left to run.

    Two trials ending together both ask; the batch row lock lets exactly one of them close it.
    """
    for attempt in range(3):
        try:
            return _finish_batch_if_done(batch_id)
        except OperationalError:  # a lock timeout or deadlock victim: ask again
            if attempt == 2:
                raise
            time.sleep(0.2 * (attempt + 1))
    return False


def _finish_batch_if_done(batch_id: int) -> bool:
    with transaction.atomic():
        batch = Batch.objects.select_for_update().get(pk=batch_id)
        if batch.status == Batch.Status.FINISHED:
            return False
        open_trials = Trial.objects.filter(run__batch_id=batch_id).exclude(
            status__in=Trial.FINAL_STATUSES
        )
        if open_trials.exists():
            return False
        batch.status = Batch.Status.FINISHED
        batch.finished_at = timezone.now()
        batch.save(update_fields=["status", "finished_at"])
    benchmark.write_benchmark(batch)
    publishing.batch_changed(batch_id=batch_id, status=batch.status)
    return True
