"""Reruns started from the UI or the API: a new batch linked to the one it came from, with the
same case versions and variants, queued at once."""

from __future__ import annotations

from collections import Counter

from django.db import transaction

from evals_app.models import Batch, Case, Run, Trial
from runner.batches.creation import RunRequest, create_batch
from runner.batches.planning import InvalidInput, endpoint_problems
from runner.jobs.dispatch import enqueue

RETRYABLE = (Trial.Status.FAILED, Trial.Status.ERRORED, Trial.Status.TIMED_OUT)


def rerun_problems(runs: list[Run]) -> list[str]:
    """What `proctor eval` would refuse about these runs' cases on this server: today, a case
    that needs a model endpoint the server lacks (each trial would otherwise end
    ``dispatch_failed``, looking like the agent's fault)."""
    cases = [
        {
            "definition": run.case_version.definition,
            "module_path": run.case_version.module_path,
            "suite": run.case_version.definition.get("suite", ""),
            "case": run.case_version.definition.get("case", ""),
        }
        for run in runs
    ]
    return list(dict.fromkeys(endpoint_problems(cases, where=" on the server")))


def _rerun(source: Batch, runs_and_counts: list[tuple[Run, int]], *, user, label: str) -> Batch:
    """Raises InvalidInput, having written nothing, when the CLI would refuse the cases."""
    problems = rerun_problems([run for run, count in runs_and_counts if count > 0])
    if problems:
        raise InvalidInput(problems)
    requests = [
        RunRequest(run.case_version, run.variant, count, code=(run.spec or {}).get("code"))
        for run, count in runs_and_counts
        if count > 0
    ]
    batch, trial_ids = create_batch(
        source.organization,
        requests,
        options={**source.options, "rerun_of": source.pk, "scope": label},
        parent=source,
        user=user,
        label=label,
    )
    transaction.on_commit(lambda: enqueue(trial_ids))
    return batch


def _trial_counts(runs) -> dict[int, int]:
    return dict(Counter(Trial.objects.filter(run__in=runs).values_list("run_id", flat=True)))


def rerun_batch(batch: Batch, *, user) -> Batch:
    runs = list(batch.runs.select_related("case_version", "variant"))
    counts = _trial_counts(runs)
    return _rerun(
        batch, [(run, counts.get(run.pk, 1)) for run in runs], user=user, label="rerun of the batch"
    )


def rerun_failed(batch: Batch, *, user) -> Batch:
    runs = list(batch.runs.select_related("case_version", "variant"))
    failed = Counter(
        Trial.objects.filter(run__batch=batch, status__in=RETRYABLE).values_list(
            "run_id", flat=True
        )
    )
    return _rerun(
        batch,
        [(run, failed.get(run.pk, 0)) for run in runs],
        user=user,
        label="rerun of failed trials",
    )


def rerun_errored(batch: Batch, *, user) -> Batch:
    """A new batch with only the errored trials (broken infrastructure: sandbox, harness start,
    prepare), each cell with as many trials as errored; failures and time-outs are results
    about the agent and stay."""
    runs = list(batch.runs.select_related("case_version", "variant"))
    errored = Counter(
        Trial.objects.filter(run__batch=batch, status=Trial.Status.ERRORED).values_list(
            "run_id", flat=True
        )
    )
    return _rerun(
        batch,
        [(run, errored.get(run.pk, 0)) for run in runs],
        user=user,
        label="rerun of errored trials",
    )


def rerun_run(run: Run, *, user) -> Batch:
    count = run.trials.count() or 1
    return _rerun(
        run.batch,
        [(run, count)],
        user=user,
        label=f"rerun of {run.case_version.case.slug} × {run.variant.name}",
    )


def rerun_case(batch: Batch, case: Case, *, user) -> Batch:
    runs = list(
        batch.runs.filter(case_version__case=case).select_related("case_version", "variant")
    )
    counts = _trial_counts(runs)
    return _rerun(
        batch,
        [(run, counts.get(run.pk, 1)) for run in runs],
        user=user,
        label=f"rerun of {case.slug}",
    )


def rerun_trial(trial: Trial, *, user) -> Batch:
    """One more trial of the trial's cell (same case version and variant), as a new batch."""
    run = trial.run
    return _rerun(
        run.batch,
        [(run, 1)],
        user=user,
        label=(
            f"rerun of trial #{trial.index + 1} of "
            f"{run.case_version.case.slug} × {run.variant.name}"
        ),
    )
