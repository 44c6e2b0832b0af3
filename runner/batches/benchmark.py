"""``benchmark.json``: a batch's summary per variant, with the warnings that threaten the
comparison (an arm that timed out or broke more often than another) listed first."""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Count, Q, Sum

from evals_app.models import Batch, Trial, Variant
from evals_app.stats import validity_warnings
from runner.jobs import artifacts

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
    return {
        "batch": batch.pk,
        "created_at": batch.created_at.isoformat(),
        "finished_at": batch.finished_at.isoformat() if batch.finished_at else None,
        "validity_warnings": {
            name: v["validity_warnings"] for name, v in variants.items() if v["validity_warnings"]
        },
        "variants": variants,
    }


def write_benchmark(batch: Batch) -> dict[str, Any]:
    summary = summarize(batch)
    artifacts.write_text(
        artifacts.batch_dir(batch.pk), "benchmark.json", json.dumps(summary, indent=2) + "\n"
    )
    return summary
