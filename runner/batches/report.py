"""A finished batch as the plain data ``proctor eval --json`` prints: a few queries per 500
trials, read in chunks so a large batch is never held as model objects all at once."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from evals_app.cost import batch_cost
from evals_app.failure_groups import failure_groups
from evals_app.models import Batch, Check, Run, Trial
from runner.jobs import adaptive
from runner.jobs.benchmark import summarize


def batch_report(batch: Batch, *, dashboard_url: str | None = None) -> dict[str, Any]:
    """The report, its links to the dashboard at ``dashboard_url`` (default
    PROCTOR_DASHBOARD_URL; a server passes the address it was reached at)."""
    runs = (
        Run.objects.filter(batch=batch)
        .select_related("case_version__case__suite", "variant")
        # The report shows none of these and they are the large fields of a run.
        .defer("spec", "case_version__definition", "case_version__sources", "variant__spec")
        .order_by("case_version__case__suite__slug", "case_version__case__slug", "variant__name")
    )
    dashboard = (dashboard_url or settings.PROCTOR_DASHBOARD_URL).rstrip("/")
    trials_by_run = _trials_by_run(batch, dashboard)
    saving = adaptive.savings(batch)
    cells = adaptive.cell_outcomes(batch) if saving is not None else {}
    return {
        "batch": batch.pk,
        "label": batch.label,
        "url": f"{dashboard}/batches/{batch.pk}/",
        "cost_usd": batch_cost(batch).total_usd,
        # The batch's cap (--max-cost, a suite's budget=), and what was spent when it stopped.
        "budget": {
            "max_cost_usd": batch.max_cost_usd,
            "reached_usd": batch.budget_reached_usd,
            "budget_exhausted": Trial.objects.filter(
                run__batch=batch, status=Trial.Status.BUDGET_EXHAUSTED
            ).count()
            if batch.budget_reached_usd is not None
            else 0,
        },
        "validity_warnings": summarize(batch)["validity_warnings"],
        # Adaptive trials: run, the most they could have been, saved; None for fixed counts.
        "adaptive": saving.to_dict() if saving is not None else None,
        # The failed and errored trials grouped by cause, the largest group first.
        "failure_groups": [
            {**group.to_dict(), "urls": [f"{dashboard}/trials/{t}/" for t in group.trial_ids]}
            for group in failure_groups(batch)
        ],
        "runs": [
            {
                "suite": run.case_version.case.suite.slug,
                "case": run.case_version.case.slug,
                "case_version": run.case_version.number,
                "variant": run.variant.name,
                "run_id": run.pk,
                "url": f"{dashboard}/runs/{run.pk}/",
                "trials": trials_by_run.get(run.pk, []),
                **({"adaptive": cells[run.pk].to_dict()} if run.pk in cells else {}),
            }
            for run in runs.iterator(chunk_size=CHUNK)
        ],
    }


CHUNK = 500


def _trials_by_run(batch: Batch, dashboard: str) -> dict[int, list[dict[str, Any]]]:
    """Each run's trials as report entries, in index order, read CHUNK at a time with their
    checks. Read as plain rows: a model object per trial and check cost more than the rest of
    the report together."""
    trials = (
        Trial.objects.filter(run__batch=batch).order_by("run_id", "index").values(*_TRIAL_FIELDS)
    )
    by_run: dict[int, list[dict[str, Any]]] = {}
    chunk: list[dict[str, Any]] = []
    for trial in trials.iterator(chunk_size=CHUNK):
        chunk.append(trial)
        if len(chunk) == CHUNK:
            _add_chunk(by_run, chunk, dashboard)
            chunk = []
    _add_chunk(by_run, chunk, dashboard)
    return by_run


_TRIAL_FIELDS = (
    "id",
    "run_id",
    "session_id",
    "index",
    "status",
    "finish_reason",
    "duration_ms",
    "answer",
    "error",
    "conversation_outcome",
    "stop_cause",
    "responder_cause",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "score",
    "threshold",
)
_CHECK_FIELDS = ("trial_id", "name", "kind", "passed", "message", "score", "weight", "metric")


def _add_chunk(
    by_run: dict[int, list[dict[str, Any]]], trials: list[dict[str, Any]], dashboard: str
) -> None:
    if not trials:
        return
    checks: dict[int, list[dict[str, Any]]] = {}
    for check in (
        Check.objects.filter(trial_id__in=[trial["id"] for trial in trials])
        .order_by("trial_id", "index")
        .values(*_CHECK_FIELDS)
    ):
        checks.setdefault(check["trial_id"], []).append(_check(check))
    for trial in trials:
        by_run.setdefault(trial["run_id"], []).append(
            _trial(trial, checks.get(trial["id"], []), dashboard)
        )


def _trial(trial: dict[str, Any], checks: list[dict[str, Any]], dashboard: str) -> dict[str, Any]:
    return {
        "id": trial["id"],
        "url": f"{dashboard}/trials/{trial['id']}/",
        "session_id": trial["session_id"] or None,
        "index": trial["index"],
        "status": trial["status"],
        "finish_reason": trial["finish_reason"],
        "duration_ms": trial["duration_ms"],
        "answer": trial["answer"],
        "error": trial["error"],
        "conversation": {
            "outcome": trial["conversation_outcome"] or None,
            "stop_cause": trial["stop_cause"] or None,
            "responder_cause": trial["responder_cause"] or None,
        },
        "usage": {"input_tokens": trial["input_tokens"], "output_tokens": trial["output_tokens"]},
        "cost_usd": trial["cost_usd"],
        "score": trial["score"],
        "threshold": trial["threshold"],
        "checks": checks,
    }


def _check(check: dict[str, Any]) -> dict[str, Any]:
    """The documented four keys, plus the score of a judge or an assertion and an assertion's
    weight and metric where they exist."""
    shown: dict[str, Any] = {
        "name": check["name"],
        "kind": check["kind"],
        "passed": check["passed"],
        "message": check["message"],
    }
    if check["score"] is not None:
        shown["score"] = check["score"]
    if check["kind"] == "assertion":
        shown.update(weight=check["weight"], metric=check["metric"] or None)
    return shown


def report_pass_rate(report: dict[str, Any]) -> float:
    """The share of the report's trials that passed (0 when it has none); trials the batch's
    budget ended are no result and count in neither side."""
    statuses = [
        t["status"]
        for run in report["runs"]
        for t in run["trials"]
        if t["status"] != Trial.Status.BUDGET_EXHAUSTED
    ]
    return statuses.count(Trial.Status.PASSED) / len(statuses) if statuses else 0.0
