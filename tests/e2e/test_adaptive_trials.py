"""Adaptive trials end to end: `proctor eval` runs each cell's minimum, then more trials only
where the outcome is undecided, and says how many it saved. A command agent whose checks
always pass on one case and always fail on another stops at the minimum there; a case whose
check is a coin (heads on even trial indexes) runs to the maximum."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.running import Backend, write_eval

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
