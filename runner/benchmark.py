"""``benchmark.json``: a batch's summary per variant, with the warnings that threaten the
comparison (an arm that timed out or broke more often than another) listed first."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from django.db.models import Count, Q, Sum

from evals_app.models import Batch, Trial
from runner import artifacts

FINAL = [s.value for s in Trial.FINAL_STATUSES]


def summarize(batch: Batch) -> dict[str, Any]:
    """Per-variant counts, pass rates, tokens and validity warnings (two queries)."""
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
    stops: dict[str, dict[str, int]] = defaultdict(dict)
    for group in (
        Trial.objects.filter(run__batch=batch)
        .filter(Q(conversation_outcome="stopped") | Q(plan_state="planning"))
        .values("run__variant__name", "stop_cause", "responder_cause", "plan_state")
        .annotate(n=Count("id"))
    ):
        bucket = stops[group["run__variant__name"]]
        for name in _warning_names(dict(group)):
            bucket[name] = bucket.get(name, 0) + group["n"]
    variants = {}
    for row in rows:
        name = row["run__variant__name"]
        graded = row["passed"] + row["failed"]
        warnings = {}
        if row["timed_out"]:
            warnings["timed_out"] = row["timed_out"]
        if row["errored"]:
            warnings["errored"] = row["errored"]
        warnings.update(sorted(stops[name].items()))
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
        "validity_warnings": {name: v["validity_warnings"] for name, v in variants.items() if v["validity_warnings"]},
        "variants": variants,
    }


def _warning_names(row: dict[str, Any]) -> list[str]:
    """The validity warnings one group of trials raises. An agent that did not ask when a script
    expected it is a result about the agent, not a threat to the comparison: no warning."""
    names = []
    if row["stop_cause"] == "responder_cannot_answer":
        names.append(f"responder_cannot_answer:{row['responder_cause'] or 'unknown'}")
    elif row["stop_cause"] == "simulated_user_failed":
        names.append(f"simulated_user_failed:{row['responder_cause'] or 'unknown'}")
    elif row["stop_cause"] == "max_turns_reached":
        names.append("max_turns_reached")
    if row["plan_state"] == "planning":
        names.append("never_left_planning")
    return names


def write_benchmark(batch: Batch) -> dict[str, Any]:
    summary = summarize(batch)
    artifacts.write_text(artifacts.batch_dir(batch.pk), "benchmark.json", json.dumps(summary, indent=2) + "\n")
    return summary
