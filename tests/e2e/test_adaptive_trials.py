"""Adaptive trials end to end: `proctor eval` runs each cell's minimum, then more trials only
where the outcome is undecided, and says how many it saved. A command agent whose checks
always pass on one case and always fail on another stops at the minimum there; a case whose
check is a coin (heads on even trial indexes) runs to the maximum."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.running import Backend, write_eval

# The scaled mode's fixtures: PostgreSQL, Redis and a real Celery worker (two threads).
from e2e.test_celery_worker import scaled_backend, worker_log  # noqa: F401

ADAPTIVE_EVAL = """
from proctor import adaptive, case, profile, suite, variant

def heads_on_even_trials(ctx):
    return ctx.trial_index % 2 == 0

def always(ctx):
    return True

def never(ctx):
    return False

s = suite("coins", prompt="work", trials={trials},
          cases=[case("always-passes", validate=always),
                 case("always-fails", validate=never),
                 case("coin", validate=heads_on_even_trials)],
          variants=[variant("command", profile=profile("noop",
              run="echo '{{\\"_tag\\":\\"Finished\\",\\"reason\\":\\"done\\"}}'"))])
"""


def _trials_per_case(report) -> dict[str, list[int]]:
    return {run["case"]: [t["index"] for t in run["trials"]] for run in report["runs"]}


@pytest.mark.parametrize("jobs", ["1", "3"])
def test_decided_cells_stop_at_the_minimum_and_the_coin_runs_to_the_maximum(
    sqlite_backend: Backend, tmp_path: Path, jobs: str
):
    # Seven unanimous trials decide a cell at 95% (docs/compare.md); six do not.
    write_eval(tmp_path, "coins.eval.py", ADAPTIVE_EVAL.format(trials="adaptive(min=7, max=12)"))

    report = sqlite_backend.eval_json(tmp_path, "-j", jobs, timeout=240)

    assert _trials_per_case(report) == {
        "always-fails": list(range(7)),
        "always-passes": list(range(7)),
        "coin": list(range(12)),
    }
    assert report["adaptive"] == {
        "cells": 3,
        "trials": 26,
        "maximum": 36,
        "saved": 10,
        "undecided_at_maximum": 1,
    }
    decisions = {run["case"]: run["adaptive"]["decision"] for run in report["runs"]}
    assert decisions == {"always-fails": "below", "always-passes": "above", "coin": "undecided"}
    batch = report["batch"]
    assert sqlite_backend.scalar("SELECT status FROM evals_app_batch WHERE id = ?", batch) == (
        "finished"
    )


def test_the_same_in_the_scaled_mode_on_a_celery_worker(
    scaled_backend: Backend,  # noqa: F811
    worker_log: Path,  # noqa: F811
    tmp_path: Path,
):
    project = tmp_path / "project"
    write_eval(project, "coins.eval.py", ADAPTIVE_EVAL.format(trials="adaptive(min=7, max=12)"))

    report = scaled_backend.eval_json(project, timeout=240)

    assert _trials_per_case(report) == {
        "always-fails": list(range(7)),
        "always-passes": list(range(7)),
        "coin": list(range(12)),
    }
    assert report["adaptive"]["saved"] == 10
    # Each trial was its own task on the broker: the 5 extra ones queued by the worker itself.
    assert worker_log.read_text().count("Task proctor.run_trial[") >= 2 * 26
    assert (
        scaled_backend.scalar("SELECT status FROM evals_app_batch WHERE id = ?", report["batch"])
        == "finished"
    )


def test_the_end_summary_says_how_many_trials_were_saved(sqlite_backend: Backend, tmp_path: Path):
    write_eval(tmp_path, "coins.eval.py", ADAPTIVE_EVAL.format(trials="3"))

    result = sqlite_backend.eval(tmp_path, "--trials", "adaptive:7:9", "-j", "2", timeout=240)

    assert result.returncode == 0, result.stderr
    assert (
        "Adaptive trials: 23 run, 4 saved against 27 at the maximum in all 3 cells; 1 cell "
        "undecided at the maximum." in result.stdout
    )
    assert "7/7" in result.stdout and "5/9" in result.stdout


def test_a_bad_adaptive_option_is_one_sentence(sqlite_backend: Backend, tmp_path: Path):
    write_eval(tmp_path, "coins.eval.py", ADAPTIVE_EVAL.format(trials="adaptive(min=7, max=2)"))

    result = sqlite_backend.eval(tmp_path)

    assert result.returncode == 2
    assert "adaptive min (7) must not exceed its max (2)" in result.stderr


# "Rerun failed" as the dashboard starts one (runner.batches.reruns), in a process of its own
# whose embedded pool runs it; then the adaptive batch read merged with its rerun.
RERUN_FAILED = """
import json, sys, time

import django

django.setup()
from evals_app.comparison import compare_batches
from evals_app.merged import batch_cells
from evals_app.models import Batch
from runner.batches.report import batch_report
from runner.batches.reruns import rerun_failed

parent = Batch.objects.get(pk=int(sys.argv[1]))
new = rerun_failed(parent, user=None)
deadline = time.monotonic() + 120
while not Batch.objects.filter(pk=new.pk, status=Batch.Status.FINISHED).exists():
    if time.monotonic() > deadline:
        sys.exit("the rerun did not finish in 120 s")
    time.sleep(0.1)
merged = {key[1]: [row.passed for row in rows] for key, rows in batch_cells(parent).items()}
comparison = compare_batches(parent, Batch.objects.get(pk=new.pk), merged=False)
print(json.dumps({
    "rerun": batch_report(Batch.objects.get(pk=new.pk)),
    "merged": merged,
    "compared": {c.case: c.to_dict() for c in comparison.cells},
}))
"""


def test_a_rerun_of_an_adaptive_batch_runs_its_failures_and_reads_merged(
    sqlite_backend: Backend, tmp_path: Path
):
    import json
    import sys

    from e2e.running import run_hang_aware

    write_eval(tmp_path, "coins.eval.py", ADAPTIVE_EVAL.format(trials="adaptive(min=7, max=12)"))
    report = sqlite_backend.eval_json(tmp_path, "-j", "2", timeout=240)

    result = run_hang_aware(
        [sys.executable, "-c", RERUN_FAILED, str(report["batch"])],
        cwd=tmp_path,
        env={**sqlite_backend.env, "DJANGO_SETTINGS_MODULE": "proctor.site.settings"},
        timeout=240,
    )

    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    rerun = data["rerun"]
    # Exactly the failures, uneven as they were (7 and 6), and not adaptive itself.
    assert _trials_per_case(rerun) == {"always-fails": list(range(7)), "coin": list(range(6))}
    assert rerun["adaptive"] is None
    # Merged, a cell keeps its count: the failures replaced, the passes kept. The coin's rerun
    # passed its even indexes (3 of 6) beside its 6 first passes.
    merged = data["merged"]
    assert {case: (len(r), sum(r)) for case, r in merged.items()} == {
        "always-fails": (7, 0),
        "always-passes": (7, 7),
        "coin": (12, 9),
    }
    # Compared cell by cell with different n on each side, pass@k up to each side's n.
    coin = data["compared"]["coin"]
    assert (coin["a"]["finished"], coin["b"]["finished"]) == (12, 6)
    assert list(coin["a"]["pass_at_k"]) == [str(k) for k in range(1, 13)]
    assert list(coin["b"]["pass_at_k"]) == [str(k) for k in range(1, 7)]
