"""Enough trials? `proctor eval --plan-trials DIFF` before a batch runs: each pair of variants'
minimum detectable difference and the trials (or cases) DIFF needs, from the latest batch that
ran both on these suites, else from a stated assumption; nothing runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import proctor_env, run_proctor

from compare.seeding import Seed
from compare.test_variants_in_a_batch import CAREFUL, HASTY
from evals_app.trial_planning import ASSUMED, plan_pairs

VARIANT_EVALS = Path(__file__).resolve().parents[1] / "browser" / "variant_evals"


def _planned(cases=("add", "divide", "parse", "sort"), trials=3, suite="calc"):
    return [(suite, case, ["careful", "hasty"], trials) for case in cases]


@pytest.mark.django_db
def test_the_plan_uses_the_latest_batch_that_ran_both_variants():
    seed = Seed()
    cells = {(case, "careful"): trials for case, trials in CAREFUL.items()}
    cells |= {(case, "hasty"): trials for case, trials in HASTY.items()}
    history = seed.batch(cells)
    (pair,) = plan_pairs(seed.org, _planned(), 0.10)
    assert pair.history == history and pair.history_cases == 4
    assert pair.plan.components.within == pytest.approx(0.25)
    assert pair.plan.trials_needed == 50
    assert pair.source == f"variance from batch {history.pk} (4 shared cases)"
    # More cases planned than the history had: the same variance, a smaller detectable size.
    (wider,) = plan_pairs(seed.org, _planned(cases=[f"c{i}" for i in range(16)]), 0.10)
    assert wider.plan.minimum_detectable == pytest.approx(pair.plan.minimum_detectable / 2)


@pytest.mark.django_db
def test_without_history_the_plan_says_what_it_assumed():
    seed = Seed()
    seed.batch({("add", "careful"): ["passed"], ("add", "hasty"): ["passed"]}, suite="other")
    (pair,) = plan_pairs(seed.org, _planned(), 0.10)
    assert pair.history is None and pair.plan.components == ASSUMED
    assert pair.source.startswith("assumed: no earlier batch ran both on these suites")


def test_proctor_eval_plan_trials_prints_the_plan_and_runs_nothing(tmp_path):
    evals = tmp_path / "evals"
    shutil.copytree(VARIANT_EVALS, evals)
    env = proctor_env(tmp_path / "home")
    # Six cases, two trials, no history: within 0.25 a side, none between cases. Detectable:
    # 2.8016 * sqrt(0.5 / 2 / 6) = 57.2 points; 30 points: 0.5 / (6 * 0.09 / 7.8489) = 7.3 -> 8
    # trials, or 7.8489 * 0.25 / 0.09 = 21.8 -> 22 cases.
    result = run_proctor("eval", str(evals), "--plan-trials", "30", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "Enough trials for 30 points?" in result.stdout
    assert (
        "sloppy → solver: 6 cases × 2 trials find 57.2 points; 30 points needs 8 trials per "
        "case, or 22 cases at 2 trials." in result.stdout
    )
    assert "assumed: no earlier batch ran both" in result.stdout
    listed = run_proctor(
        "eval", str(evals), "--plan-trials", "0.3", "--json", cwd=tmp_path, env=env
    )
    (pair,) = json.loads(listed.stdout)["pairs"]
    assert pair["trials_needed"] == 8 and pair["history_batch"] is None
    batches = run_proctor("compare", "1", "--variants", cwd=tmp_path, env=env)
    assert "there is no batch 1" in batches.stderr  # nothing ran
