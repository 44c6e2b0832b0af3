"""Reruns started from the UI or the API: a new batch linked to the one it came from, with the
same case versions and variants, queued at once."""

from __future__ import annotations

from collections import Counter

from django.db import transaction

from evals_app.models import Batch, Case, Run, Trial
from runner.batches.creation import RunRequest, create_batch
from runner.jobs.dispatch import enqueue

RETRYABLE = (Trial.Status.FAILED, Trial.Status.ERRORED, Trial.Status.TIMED_OUT)


def _rerun(source: Batch, runs_and_counts: list[tuple[Run, int]], *, user, label: str) -> Batch:
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
