"""Creating a batch: its runs (case version x variant) and their queued trials, in one
transaction, so a batch is never half written."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from evals_app import hot_sql
from evals_app.models import Batch, CaseVersion, Organization, Run, Trial, Variant
from runner.jobs.execution import finish_batch_if_done


@dataclass(frozen=True)
class RunRequest:
    case_version: CaseVersion
    variant: Variant
    trials: int
    # Where the run's code lives (runner.trial.spec.RunCode as JSON): the bundles a worker
    # unpacks. A rerun passes its source run's, so it runs exactly the code that run ran.
    code: dict[str, Any] | None = None


def run_spec(
    case_version: CaseVersion, variant: Variant, code: dict[str, Any] | None
) -> dict[str, Any]:
    """What the run ran with, so any result can be explained and repeated."""
    return {
        "variant": variant.spec,
        "limits": case_version.definition.get("limits", {}),
        "case_version": case_version.number,
        "definition_hash": case_version.definition_hash,
        "code": code,
    }


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
    with transaction.atomic():
        batch = Batch.objects.create(
            organization=organization,
            parent=parent,
            options=options or {},
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
                    spec=run_spec(r.case_version, r.variant, r.code),
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
    if not trial_ids:
        finish_empty(batch)
    return batch, trial_ids


def finish_empty(batch: Batch) -> None:
    finish_batch_if_done(batch.pk)
