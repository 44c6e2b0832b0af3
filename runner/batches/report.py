"""A finished batch as the plain data ``proctor eval --json`` prints (a fixed number of
queries, whatever the batch's size)."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch

from evals_app.models import Batch, Check, Run, Trial
from runner.batches.benchmark import summarize


def batch_report(batch: Batch) -> dict[str, Any]:
    runs = (
        Run.objects.filter(batch=batch)
        .select_related("case_version__case__suite", "variant")
        .prefetch_related(
            Prefetch(
                "trials",
                queryset=Trial.objects.order_by("index").prefetch_related(
                    Prefetch("checks", queryset=Check.objects.order_by("index"))
                ),
            )
        )
        .order_by("case_version__case__suite__slug", "case_version__case__slug", "variant__name")
    )
    return {
        "batch": batch.pk,
        "validity_warnings": summarize(batch)["validity_warnings"],
        "runs": [
            {
                "suite": run.case_version.case.suite.slug,
                "case": run.case_version.case.slug,
                "case_version": run.case_version.number,
                "variant": run.variant.name,
                "trials": [_trial(t) for t in run.trials.all()],
            }
            for run in runs
        ],
    }


def _trial(trial: Trial) -> dict[str, Any]:
    return {
        "index": trial.index,
        "status": trial.status,
        "finish_reason": trial.finish_reason,
        "duration_ms": trial.duration_ms,
        "answer": trial.answer,
        "error": trial.error,
        "conversation": {
            "outcome": trial.conversation_outcome or None,
            "stop_cause": trial.stop_cause or None,
            "responder_cause": trial.responder_cause or None,
        },
        "usage": {"input_tokens": trial.input_tokens, "output_tokens": trial.output_tokens},
        "score": trial.score,
        "threshold": trial.threshold,
        "checks": [_check(c) for c in trial.checks.all()],
    }


def _check(check: Check) -> dict[str, Any]:
    """The documented four keys, plus the score of a judge or an assertion and an assertion's
    weight and metric where they exist."""
    shown: dict[str, Any] = {
        "name": check.name,
        "kind": check.kind,
        "passed": check.passed,
        "message": check.message,
    }
    if check.score is not None:
        shown["score"] = check.score
    if check.kind == "assertion":
        shown.update(weight=check.weight, metric=check.metric or None)
    return shown


def report_pass_rate(report: dict[str, Any]) -> float:
    """The share of the report's trials that passed (0 when it has none)."""
    statuses = [t["status"] for run in report["runs"] for t in run["trials"]]
    return statuses.count(Trial.Status.PASSED) / len(statuses) if statuses else 0.0
