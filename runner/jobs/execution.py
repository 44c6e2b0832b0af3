"""Running a queued trial from the database: claim it, build its plan from its trial spec and
the bundles it names, execute it, and close the batch when its last trial ends.

Idempotent: a trial that is not queued (already taken, or finished) is left alone, so a task
delivered twice runs the trial once; a running trial whose lease expired (its worker died) is
taken over as its next attempt. While it runs the process's heartbeat keeps its lease fresh.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from django.conf import settings
from django.db import OperationalError
from django.db.models import Q
from django.utils import timezone

from evals_app import hot_sql
from evals_app.bundle_store import MissingBundle
from evals_app.models import Batch, Run, Trial
from evals_app.recorded_values import UnreadableRecord, rebuilt_case, rebuilt_variant
from proctor.definitions import Repo
from runner.core.reporting import TrialOutcome
from runner.jobs import (
    adaptive,
    artifact_paths,
    benchmark,
    budget,
    bundle_cache,
    eval_code,
    leases,
    publishing,
    regrading,
    trace_export,
)
from runner.jobs.database_recorder import DatabaseRecorder
from runner.sandboxes import containment
from runner.trial.execute import TrialPlan, execute_trial
from runner.trial.regrade import regrade_trial
from runner.trial.spec import RunCode, TrialSpec
from runner.workspace.kept import WorkspaceStore

log = logging.getLogger(__name__)


class PlanError(Exception):
    """The trial's definition can no longer be run as recorded; one sentence says why."""


def build_plan(trial: Trial) -> TrialPlan:
    """The trial's plan: its case and variant as recorded with its run, the callables they name
    (see runner.jobs.eval_code) and the bundles the run names (never the files of whoever
    submitted it). Raises PlanError with one sentence."""
    spec = TrialSpec.for_trial(
        trial_id=trial.pk,
        index=trial.index,
        organization_id=trial.run.batch.organization_id,
        run_spec=trial.run.spec or {},
        batch_options=trial.run.batch.options or {},
    )
    if spec.code is None:
        raise PlanError(
            "this run was recorded before Proctor kept the code a run runs; run `proctor eval` "
            "to record it again"
        )
    shared = _kept_run_plan(trial, spec.organization_id, spec.code)
    if shared is None:
        shared = _run_plan(trial, spec, spec.code)
        setattr(trial.run, _RUN_PLAN, shared)
    return _plan(trial, spec, *shared)


def _run_plan(trial: Trial, spec: TrialSpec, code: RunCode):
    """What every trial of the run shares: its case and variant rebuilt from the record, with
    project paths resolved against the project's folder, and its source."""
    org = spec.organization_id
    try:
        # The process that recorded the batch runs it in the project it loaded; any other
        # in the bundle's copy, unpacked once.
        root = eval_code.loaded_project(code.bundle) or bundle_cache.unpacked(
            org, code.bundle, project=True
        )
        profile_dir = (
            bundle_cache.unpacked(org, code.profile_bundle) if code.profile_bundle else None
        )
        source = None
        if code.source:
            folder = bundle_cache.unpacked(org, code.source["bundle"])
            source = Repo(url=str(folder / "commit.bundle"), ref=code.source["commit"])
    except MissingBundle as exc:
        raise PlanError(str(exc)) from None
    version = trial.run.case_version
    recorded_variant = spec.variant_spec
    only_checks = bool((trial.run.spec or {}).get("regrade_of"))
    if code.record < 2 and _hidden_values(recorded_variant):
        raise PlanError(
            f"variant {code.variant} was recorded before Proctor kept a variant's values whole "
            "(its env or key was hidden), so it cannot run from its record; run `proctor eval` "
            "to record it again"
        )
    try:
        callables = eval_code.callables_for(
            eval_code.RecordedCode(
                definition=version.definition,
                definition_hash=version.definition_hash,
                version=version.number,
                # A re-grade runs no agent: the variant's tool stubs are not looked for.
                variant={} if only_checks else recorded_variant,
                variant_hash="" if only_checks else code.variant_hash,
                module=root / code.eval_module,
                root=root,
                reads_comparable=code.record >= 2,
            )
        )
    except eval_code.CodeMismatch as exc:
        raise PlanError(str(exc)) from None
    try:
        resolved = rebuilt_case(
            version.definition,
            version.definition_hash,
            callables,
            module_path=root / code.eval_module,
            project=root,
        )
        variant = rebuilt_variant(
            recorded_variant, callables, profile_dir=profile_dir, project=root
        )
    except UnreadableRecord as exc:
        raise PlanError(
            f"case {code.case} (v{version.number}) under variant {code.variant}: {exc}; run "
            "`proctor eval` to record it again"
        ) from None
    return resolved, variant, source


def _hidden_values(variant: dict) -> bool:
    """Whether a record of the first format hid a value the variant needs (an env value or a
    key, kept as its hash)."""
    profile = variant.get("profile") or {}
    hidden = [*(profile.get("env") or {}).values(), *(variant.get("options") or {}).values()]
    return any(isinstance(v, str) and v.startswith("sha256:") for v in hidden)


# The shared part of a run's plan is kept on the run's own object: Run.for_running keeps that
# object only while its rows are still the run's, so the plan lives exactly as long.
_RUN_PLAN = "_proctor_run_plan"


def _kept_run_plan(trial: Trial, organization_id: int, code: RunCode) -> tuple | None:
    shared = getattr(trial.run, _RUN_PLAN, None)
    if shared is None:
        return None
    # The bundles' folders must still be there (a cache cleaned meanwhile is unpacked again);
    # a project this process loaded is run where it was loaded from.
    project = None if eval_code.loaded_project(code.bundle) else code.bundle
    for digest in (project, code.profile_bundle):
        if digest and not bundle_cache.is_unpacked(organization_id, digest):
            return None
    return shared


def _plan(trial: Trial, spec: TrialSpec, resolved, variant, source) -> TrialPlan:
    return TrialPlan(
        resolved=resolved,
        variant=variant,
        index=spec.index,
        cache_root=Path(settings.CACHE_DIR),
        git_host=settings.GIT_HOST,
        own_folders=(str(settings.PROCTOR_HOME), str(settings.ARTIFACTS_DIR)),
        responder_model=spec.responder_model,
        judge_model=spec.judge_model,
        source=source,
        max_events=settings.PROCTOR_MAX_TRIAL_EVENTS,
        workspace_store=kept_workspaces(),
    )


def kept_workspaces() -> WorkspaceStore:
    """Where this installation keeps trials' final workspaces (runner.workspace.kept)."""
    return WorkspaceStore(Path(settings.WORKSPACE_STORE), settings.WORKSPACE_KEEP_BYTES)


# How trials queued while a batch runs are started: dispatch.enqueue, passed down by whoever
# runs trials (this module sits below the dispatcher that imports it).
StartTrials = Callable[[Iterable[int]], object]


def run_trial_by_id(trial_id: int, start: StartTrials | None = None) -> str | None:
    """Run one queued trial; returns its final status, or None when it was not queued (or
    another process took it over mid-run: that process records it).

    Whatever breaks on the way (the database included), the trial ends with a final status, so
    nobody waits forever on a trial left ``running``. In an adaptive batch its end may queue
    more trials (runner.jobs.adaptive), started with ``start``.
    """
    owner = leases.owner()
    trial = Trial.claim(
        trial_id,
        owner,
        lease_s=settings.PROCTOR_LEASE_S,
        max_attempts=settings.PROCTOR_MAX_ATTEMPTS,
    )
    if trial is None:
        return None
    if trial.attempt > 1:
        # A lost run's files (a redelivered message took the trial over): start afresh.
        shutil.rmtree(artifact_paths.trial_dir(trial.run.batch_id, trial.pk), ignore_errors=True)
    status = _run_claimed(trial, owner)
    if status is None:
        return None
    # Built from the record just written, so every way of running sends the same trace.
    trace_export.trial_ended(trial_id)
    batch = trial.run.batch
    budget.stop_if_over_budget(batch)
    finish_batch_if_done(batch.pk, start=start if batch.is_adaptive else None)
    return status


def _run_claimed(trial: Trial, owner: str) -> str | None:
    """Run the claimed trial under its lease. Its processes belong to one scope: a run whose
    lease another process took over (seen by a flush or by the heartbeat) ends them all and
    writes nothing more."""
    trial_id = trial.pk
    try:
        with containment.trial_scope() as scope:
            # A claimed trial has no events: a queued one never ran, and one taken over was
            # reset (Trial.claim).
            recorder = DatabaseRecorder(trial, owner=owner, on_lost=scope.end, events_stored=0)
            with leases.holding(trial_id, on_lost=recorder.lease_lost):
                try:
                    plan = build_plan(trial)
                except PlanError as exc:
                    recorder.trial_started()
                    recorder.trial_finished(
                        TrialOutcome(status="errored", finish_reason="definition", error=str(exc))
                    )
                    status = "errored"
                else:
                    original = regrading.regraded_trial_id(trial)
                    if original is None:
                        status = execute_trial(plan, recorder).status
                    else:
                        stored = regrading.stored_trial(original)
                        status = regrade_trial(plan, stored, recorder).status
            if recorder.lost.is_set():
                return None
    except Exception as exc:
        log.exception("trial %s broke outside the runner's own error handling", trial_id)
        status = Trial.Status.ERRORED
        Trial.end_unfinished(
            Trial.objects.filter(pk=trial_id).held_by(owner),
            reason="internal error",
            error=f"{type(exc).__name__}: {exc}",
        )
        publishing.trial_changed(
            trial_id=trial_id, run_id=trial.run_id, batch_id=trial.run.batch_id, status=status
        )
    return status


def abandon_unfinished(batch: Batch, reason: str) -> int:
    """End the batch's trials that nobody will run any more as errored, saying why, and close
    the batch: no trial is left queued forever and the record stays readable."""
    # A trial another live process runs (its lease is fresh) is that process's to end.
    held_elsewhere = Q(status=Trial.Status.RUNNING, lease_expires_at__gt=timezone.now())
    count = Trial.end_unfinished(
        Trial.objects.filter(run__batch=batch).exclude(held_elsewhere),
        reason="not run",
        error=f"the worker could not run this trial: {reason}",
    )
    if count:
        finish_batch_if_done(batch.pk)
    return count


def finish_batch_if_done(batch_id: int, *, start: StartTrials | None = None) -> bool:
    """Mark the batch finished (and write benchmark.json) once no trial is left to run.

    Two trials ending together both ask; the batch row lock lets exactly one of them close it.
    With ``start``, an adaptive batch first queues the trials its undecided cells need and
    starts them with it, and stays open; without, nobody is left to run more (an interrupted
    `proctor eval`), so it closes with the trials it has.
    """
    for attempt in range(3):
        try:
            return _finish_batch_if_done(batch_id, start)
        except OperationalError:  # a lock timeout or deadlock victim: ask again
            if attempt == 2:
                raise
            time.sleep(0.2 * (attempt + 1))
    return False


def _finish_batch_if_done(batch_id: int, start: StartTrials | None) -> bool:
    batch: Batch | None = None
    if start is not None:
        batch = Batch.objects.get(pk=batch_id)
        if not batch.is_adaptive:
            start = None
    if start is not None:
        closed, added = adaptive.continue_or_close(batch_id)
        if added:
            start(added)
        if not closed:
            return False
        batch = Batch.objects.get(pk=batch_id)
    else:
        # Every trial but the batch's last finds others left: one unlocked query says so, and
        # the row lock (close_if_done) is taken only when none seems left.
        if _has_unfinished_trials(batch_id):
            return False
        batch = batch or Batch.objects.get(pk=batch_id)
        if not batch.close_if_done():
            return False
    # Slow I/O after the commit: the report file and the live update.
    benchmark.write_benchmark(batch)
    trace_export.batch_ended(batch_id)
    # Queued behind its trials' own messages, so a page never sees the batch end first.
    publishing.batch_changed(batch_id=batch_id, status=batch.status, wait=False)
    return True


def _has_unfinished_trials(batch_id: int) -> bool:
    """Whether a trial of the batch is not final yet: asked after every trial, so written as
    plain SQL (the ORM took longer to compile it than the database to answer). It names the
    statuses that are not final rather than excluding the final ones: the (run, status) index
    then goes straight to them, where an exclusion stepped over every finished trial of the run
    first, on every ask (quadratic in a run's trials)."""
    statuses = list(Trial.UNFINISHED_STATUSES)
    sql = (
        f"SELECT 1 FROM {Trial._meta.db_table} t JOIN {Run._meta.db_table} r ON r.id = t.run_id "
        f"WHERE r.batch_id = %s AND t.status IN ({', '.join(['%s'] * len(statuses))}) LIMIT 1"
    )
    return bool(hot_sql.execute(sql, [batch_id, *statuses], fetch=True))
