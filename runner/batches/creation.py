"""Creating a batch: its runs (case version x variant) and their queued trials, in one
transaction, so a batch is never half written."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from evals_app import hot_sql
from evals_app.models import Batch, CaseVersion, Organization, Run, Trial, UnsentTrial, Variant
from proctor.definitions import AdaptiveTrials
from runner.jobs.execution import finish_batch_if_done


@dataclass(frozen=True)
class RunRequest:
    case_version: CaseVersion
    variant: Variant
    trials: int
    # Where the run's code lives (runner.trial.spec.RunCode as JSON): the bundles a worker
    # unpacks. A rerun passes its source run's, so it runs exactly the code that run ran.
    code: dict[str, Any] | None = None
    # A re-grade's run: the ids of the trials its trials grade again, by index
    # (runner.batches.regrade); its trials run no agent.
    regrade_of: list[int] | None = None
    # adaptive(...): ``trials`` is its minimum, and the run gets more while undecided.
    adaptive: AdaptiveTrials | None = None


def run_spec(
    case_version: CaseVersion,
    variant: Variant,
    code: dict[str, Any] | None,
    regrade_of: list[int] | None = None,
) -> dict[str, Any]:
    """What the run ran with, so any result can be explained and repeated."""
    spec = {
        "variant": variant.spec,
        "limits": case_version.definition.get("limits", {}),
        "case_version": case_version.number,
        "definition_hash": case_version.definition_hash,
        "code": code,
    }
    if regrade_of:
        spec["regrade_of"] = regrade_of
    return spec


def create_batch(
    organization: Organization,
    requests: Sequence[RunRequest],
    *,
    options: dict[str, Any] | None = None,
    parent: Batch | None = None,
    user=None,
    label: str = "",
    max_cost_usd: float | None = None,
) -> tuple[Batch, list[int]]:
    """The new batch and the ids of its queued trials (enqueue them after the commit);
    ``max_cost_usd`` caps what it may spend (runner.jobs.budget)."""
    options = dict(options or {})
    options.pop("adaptive", None)
    if any(r.adaptive is not None for r in requests):
        options["adaptive"] = True
    with transaction.atomic():
        batch = Batch.objects.create(
            organization=organization,
            parent=parent,
            options=options,
            created_by=user,
            label=label,
            max_cost_usd=max_cost_usd,
        )
        runs = Run.objects.bulk_create(
            [
                Run(
                    batch=batch,
                    case_version=r.case_version,
                    variant=r.variant,
                    spec=run_spec(r.case_version, r.variant, r.code, r.regrade_of),
                    adaptive=r.adaptive.to_json() if r.adaptive is not None else None,
                )
                for r in requests
            ]
        )
        trial_ids = hot_sql.insert_copies(
            Trial,
            Trial(),
            [
                {"run_id": run.pk, "index": i}
                for run, r in zip(runs, requests, strict=True)
                for i in range(r.trials)
            ],
        )
        if not settings.EMBEDDED:
            # Queued on the broker after the commit; until then (Redis down, this process gone
            # first) the outbox says so and the reaper re-sends them.
            UnsentTrial.objects.bulk_create(
                [UnsentTrial(trial_id=trial_id) for trial_id in trial_ids], batch_size=5000
            )
    if not trial_ids:
        finish_empty(batch)
    return batch, trial_ids


def finish_empty(batch: Batch) -> None:
    finish_batch_if_done(batch.pk)
