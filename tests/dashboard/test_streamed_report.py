"""The end-of-run report reads a batch's trials in chunks and says exactly what reading them all
at once said."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.db import connection
from django.db.models import Prefetch
from django.test.utils import CaptureQueriesContext
from factories import (
    make_batch,
    make_case,
    make_cast,
    make_checks,
    make_run,
    make_trial,
    make_variant,
    make_version,
)

from evals_app.models import Check, Run, Trial
from runner.batches import report
from runner.jobs.benchmark import summarize

pytestmark = pytest.mark.django_db

S = Trial.Status


def _all_at_once(batch) -> list[dict]:
    """The runs as the report built them before it streamed: every trial prefetched."""
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
    dashboard = settings.PROCTOR_DASHBOARD_URL
    return [
        {
            "suite": run.case_version.case.suite.slug,
            "case": run.case_version.case.slug,
            "case_version": run.case_version.number,
            "variant": run.variant.name,
            "run_id": run.pk,
            "url": f"{dashboard}/runs/{run.pk}/",
            "trials": [_trial_entry(t, dashboard) for t in run.trials.all()],
        }
        for run in runs
    ]


def _trial_entry(trial: Trial, dashboard: str) -> dict:
    """A trial as the report documents it, read from its model object and its checks'."""
    checks = []
    for check in trial.checks.all():
        shown = {
            "name": check.name,
            "kind": check.kind,
            "passed": check.passed,
            "message": check.message,
        }
        if check.score is not None:
            shown["score"] = check.score
        if check.kind == "assertion":
            shown.update(weight=check.weight, metric=check.metric or None)
        checks.append(shown)
    return {
        "id": trial.pk,
        "url": f"{dashboard}/trials/{trial.pk}/",
        "session_id": trial.session_id or None,
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
        "cost_usd": trial.cost_usd,
        "score": trial.score,
        "threshold": trial.threshold,
        "checks": checks,
    }


def _batch(org, cases: int, trials: int, *, prefix: str = "case"):
    batch = make_batch(org, status="finished")
    variants = [make_variant(org, f"{prefix}-{name}") for name in ("careful", "hasty")]
    # Trials are made out of index order, so their ids do not follow the report's order.
    for c in reversed(range(cases)):
        version = make_version(make_case(org, f"{prefix}-{c}"))
        for variant in variants:
            run = make_run(batch, version, variant)
            for index in reversed(range(trials)):
                status = (S.PASSED, S.FAILED, S.ERRORED)[(c + index) % 3]
                trial = make_trial(run, index, status, answer=f"answer {c}.{index}")
                if status != S.ERRORED:
                    make_checks(trial, validator_passed=status == S.PASSED)
                if status == S.PASSED:  # an assertion shows its score, weight and metric
                    Check.objects.create(
                        trial=trial,
                        index=2,
                        name="cheap enough",
                        kind="assertion",
                        passed=True,
                        score=0.5 + index / 10,
                        weight=2.0,
                        metric="cost" if index % 2 else "",
                    )
    return batch


def test_the_streamed_report_matches_reading_every_trial_at_once(monkeypatch):
    batch = _batch(make_cast().acme, cases=3, trials=4)
    monkeypatch.setattr(report, "CHUNK", 5)  # several chunks, one ending mid-run

    shown = report.batch_report(batch)

    assert json.dumps(shown["runs"], sort_keys=True) == json.dumps(
        _all_at_once(batch), sort_keys=True
    )
    assert shown["validity_warnings"] == summarize(batch)["validity_warnings"]
    assert sum(len(run["trials"]) for run in shown["runs"]) == 3 * 2 * 4


def test_its_queries_do_not_grow_with_the_batch_within_a_chunk():
    acme = make_cast().acme
    small, big = _batch(acme, 1, 2, prefix="small"), _batch(acme, 20, 10, prefix="big")
    with CaptureQueriesContext(connection) as small_queries:
        report.batch_report(small)
    with CaptureQueriesContext(connection) as big_queries:
        shown = report.batch_report(big)
    assert sum(len(run["trials"]) for run in shown["runs"]) == 400
    assert len(big_queries) == len(small_queries)
