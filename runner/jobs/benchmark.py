"""``benchmark.json``: a batch's summary per variant, with the warnings that threaten the
comparison (an arm that timed out or broke more often than another) listed first."""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Count, Q, Sum

from evals_app.estimators import mean_pass_k_curves, pass_k_curves
from evals_app.models import Batch, Trial, Variant
from evals_app.pass_rates import validity_warnings
from runner.conversation.planning_writes import WROTE_WHILE_PLANNING, wrote_while_planning
from runner.jobs import artifact_paths

FINAL = [s.value for s in Trial.FINAL_STATUSES]


def summarize(batch: Batch) -> dict[str, Any]:
    """Per-variant counts, pass rates, tokens and validity warnings (three queries)."""
    rows = (
        Trial.objects.filter(run__batch=batch)
        .values("run__variant__name")
        .annotate(
            total=Count("id"),
            passed=Count("id", filter=Q(status=Trial.Status.PASSED)),
            failed=Count("id", filter=Q(status=Trial.Status.FAILED)),
            timed_out=Count("id", filter=Q(status=Trial.Status.TIMED_OUT)),
            errored=Count("id", filter=Q(status=Trial.Status.ERRORED)),
            input_tokens=Sum("input_tokens"),
            output_tokens=Sum("output_tokens"),
        )
        .order_by("run__variant__name")
    )
    names = dict(Variant.objects.filter(runs__batch=batch).values_list("id", "name").distinct())
    warnings_by_name = {names[vid]: counts for vid, counts in validity_warnings(batch).items()}
    _count_planning_writes(batch, warnings_by_name)
    variants = {}
    for row in rows:
        name = row["run__variant__name"]
        graded = row["passed"] + row["failed"]
        warnings = warnings_by_name.get(name, {})
        variants[name] = {
            "trials": row["total"],
            "passed": row["passed"],
            "failed": row["failed"],
            "timed_out": row["timed_out"],
            "errored": row["errored"],
            # Pass rate over every trial: a timeout or an error is not a pass.
            "pass_rate": round(row["passed"] / row["total"], 4) if row["total"] else None,
            "pass_rate_of_graded": round(row["passed"] / graded, 4) if graded else None,
            "input_tokens": row["input_tokens"] or 0,
            "output_tokens": row["output_tokens"] or 0,
            "validity_warnings": warnings,
        }
    cells = _pass_k_cells(batch)
    for name, variant in variants.items():
        curves = mean_pass_k_curves(
            [(c["finished"], c["passed"]) for c in cells if c["variant"] == name]
        )
        variant["pass_at_k"] = _rounded(curves["pass@k"])
        variant["pass_hat_k"] = _rounded(curves["pass^k"])
    return {
        "batch": batch.pk,
        "created_at": batch.created_at.isoformat(),
        "finished_at": batch.finished_at.isoformat() if batch.finished_at else None,
        "validity_warnings": {
            name: v["validity_warnings"] for name, v in variants.items() if v["validity_warnings"]
        },
        "variants": variants,
        "cells": cells,
    }


def _rounded(curve: dict[int, float]) -> dict[str, float]:
    return {str(k): round(v, 4) for k, v in curve.items()}


def _pass_k_cells(batch: Batch) -> list[dict[str, Any]]:
    """pass@k and pass^k (k = 1..n) of each cell, from its n finished trials of which c
    passed: a timeout or an error is not a pass, as in ``pass_rate`` (one query)."""
    rows = (
        Trial.objects.filter(run__batch=batch)
        .order_by()
        .values(
            "run__case_version__case__suite__slug",
            "run__case_version__case__slug",
            "run__case_version__number",
            "run__variant__name",
        )
        .annotate(
            finished=Count("id", filter=Q(status__in=FINAL)),
            passed=Count("id", filter=Q(status=Trial.Status.PASSED)),
        )
    )
    cells = []
    for row in rows:
        curves = pass_k_curves(row["finished"], row["passed"])
        cells.append(
            {
                "suite": row["run__case_version__case__suite__slug"],
                "case": row["run__case_version__case__slug"],
                "case_version": row["run__case_version__number"],
                "variant": row["run__variant__name"],
                "finished": row["finished"],
                "passed": row["passed"],
                "pass_at_k": _rounded(curves["pass@k"]),
                "pass_hat_k": _rounded(curves["pass^k"]),
            }
        )
    cells.sort(key=lambda c: (c["suite"], c["case"], c["variant"]))
    return cells


def _count_planning_writes(batch: Batch, warnings: dict[str, dict[str, int]]) -> None:
    """Plan-mode trials whose workspace changed while planning (the mode failing, recorded in
    their permission-denials.json) are a validity warning of their variant."""
    planned = Trial.objects.filter(run__batch=batch).exclude(plan_state="")
    for trial_id, name in planned.values_list("id", "run__variant__name"):
        if wrote_while_planning(artifact_paths.trial_dir(batch.pk, trial_id)):
            counts = warnings.setdefault(name, {})
            counts[WROTE_WHILE_PLANNING] = counts.get(WROTE_WHILE_PLANNING, 0) + 1


def write_benchmark(batch: Batch) -> dict[str, Any]:
    summary = summarize(batch)
    artifact_paths.write_text(
        artifact_paths.batch_dir(batch.pk), "benchmark.json", json.dumps(summary, indent=2) + "\n"
    )
    return summary
