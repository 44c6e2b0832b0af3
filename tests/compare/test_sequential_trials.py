"""The sequential procedure behind adaptive trials (evals_app.sequential_trials): its error rate
stays at or below the nominal level however often it looks, where an ordinary 95% interval
looked at after every trial does not; and the decisions a user sees. Seeded and pure Python."""

from __future__ import annotations

import math
import random

import pytest

from evals_app.estimators import wilson_interval
from evals_app.sequential_trials import (
    ABOVE,
    BELOW,
    Cell,
    cell_decision,
    cells_wanting_a_trial,
    confidence_sequence,
    log_evidence,
    pair_decided,
    trials_saved,
)
from proctor import adaptive

RUNS = 2000
MAX = 60


def _looks_at_every_trial(p: float, rule, rng: random.Random) -> str | None:
    """One cell run the adaptive way: a look after every trial from the minimum, stopping at
    the first decision or at the maximum."""
    passes = 0
    for n in range(1, rule.max + 1):
        passes += rng.random() < p
        if n >= rule.min and (decision := cell_decision(passes, n, rule)) is not None:
            return decision
    return None


@pytest.mark.parametrize("p", [0.5, 0.45, 0.3])
def test_a_cell_is_wrongly_decided_at_most_alpha_of_the_time_under_repeated_looks(p):
    rule = adaptive(min=1, max=MAX)
    rng = random.Random(31)
    # The true rate is at or below the threshold: deciding "above" is the error (and at 0.5,
    # deciding at all is).
    wrong = sum(
        _looks_at_every_trial(p, rule, rng) in ((ABOVE, BELOW) if p == 0.5 else (ABOVE,))
        for _ in range(RUNS)
    )
    assert wrong / RUNS <= 0.05, wrong


def test_a_fixed_95_percent_interval_looked_at_after_every_trial_errs_far_more_often():
    """What the procedure guards against: a Wilson interval is 95% for one look, but looked at
    after each of 60 trials it leaves out the true 0.5 in about a third of the runs."""
    rng = random.Random(31)
    wrong = 0
    for _ in range(RUNS):
        passes = 0
        for n in range(1, MAX + 1):
            passes += rng.random() < 0.5
            low, high = wilson_interval(passes, n)
            if not low <= 0.5 <= high:
                wrong += 1
                break
    assert wrong / RUNS > 0.15


def test_two_equal_variants_are_told_apart_at_most_alpha_of_the_time():
    rule = adaptive(min=1, max=40)
    rng = random.Random(7)
    told_apart = 0
    for p in (0.5, 0.7):
        for _ in range(RUNS // 2):
            a = b = 0
            for n in range(1, rule.max + 1):
                a += rng.random() < p
                b += rng.random() < p
                # The difference's sequence alone (both cells at 0.5-0.7 are rarely decided).
                if not _overlap((a, n), (b, n), rule):
                    told_apart += 1
                    break
    assert told_apart / RUNS <= 0.05, told_apart


def _overlap(a, b, rule) -> bool:
    half = (1 - rule.confidence) / 2
    low_a, high_a = confidence_sequence(*a, half)
    low_b, high_b = confidence_sequence(*b, half)
    return not (low_b > high_a or low_a > high_b)


def test_the_evidence_is_the_mixture_over_the_likelihood_at_p():
    # 7 passes of 7 against 0.5: B(7.5, 0.5) / B(0.5, 0.5) / 0.5^7 = 0.2095 * 128 / pi ... by hand:
    # B(7.5, 0.5) = Gamma(7.5) Gamma(0.5) / Gamma(8) = 1871.25 * 1.7725 / 5040 = 0.65809;
    # B(0.5, 0.5) = pi; 0.65809 / pi * 128 = 26.81.
    assert math.exp(log_evidence(7, 7, 0.5)) == pytest.approx(26.81, abs=0.01)
    # 6 of 6: B(6.5, 0.5) / pi * 64 = 0.70871 / pi * 64 = 14.44, under 20.
    assert math.exp(log_evidence(6, 6, 0.5)) == pytest.approx(14.44, abs=0.01)


def test_unanimous_cells_are_decided_at_seven_trials_at_95_percent():
    rule = adaptive(min=2, max=10)
    assert cell_decision(6, 6, rule) is None
    assert cell_decision(7, 7, rule) == ABOVE
    assert cell_decision(0, 7, rule) == BELOW
    assert cell_decision(5, 10, rule) is None
    low, high = confidence_sequence(7, 7, 0.05)
    assert high == 1.0 and 0.5 < low < 0.53


def test_only_undecided_idle_cells_below_the_maximum_get_a_trial():
    rule = adaptive(min=7, max=12)
    cells = {"passes": Cell(7, 7, 0), "fails": Cell(0, 7, 0), "coin": Cell(4, 7, 0)}
    # One variant per case: each case is looked at alone.
    assert [n for n in cells if cells_wanting_a_trial({n: cells[n]}, rule)] == ["coin"]
    assert cells_wanting_a_trial({"coin": Cell(4, 7, 1)}, rule) == []  # waits for its trial
    assert cells_wanting_a_trial({"coin": Cell(6, 12, 0)}, rule) == []  # at the maximum


def test_a_decided_cell_runs_on_while_its_pair_is_undecided():
    rule = adaptive(min=7, max=30)
    # careful always passes (decided), hasty is a coin: the case's difference is not settled.
    case = {"careful": Cell(7, 7, 0), "hasty": Cell(4, 7, 0)}
    assert cells_wanting_a_trial(case, rule) == ["careful", "hasty"]
    assert not pair_decided((7, 7), (4, 7), rule)
    # Both decided, on the same side or not: the pair is settled.
    assert pair_decided((7, 7), (7, 7), rule) and pair_decided((7, 7), (0, 7), rule)
    # Apart before hasty is decided: 30/30 (at least 0.82) against 15/30 (at most 0.78).
    assert pair_decided((30, 30), (15, 30), rule)
    assert not pair_decided((20, 20), (10, 20), rule)


def test_the_saving_is_counted_against_the_maximum_everywhere():
    assert trials_saved([7, 7, 12], adaptive(min=7, max=12)) == 10


def test_the_worked_example_of_docs_compare_md():
    rule = adaptive(min=2, max=10)
    assert cell_decision(6, 6, rule) is None and cell_decision(7, 7, rule) == ABOVE
    assert cell_decision(0, 7, rule) == BELOW
    assert cell_decision(6, 10, rule) is None
    low, high = confidence_sequence(6, 10, 0.05)
    assert (round(low, 2), round(high, 2)) == (0.18, 0.93)
    assert confidence_sequence(6, 6, 0.05)[0] == pytest.approx(0.474, abs=1e-3)
    assert trials_saved([7, 7, 10], rule) == 6
    # One dissenting trial costs many: 11 of 12 decide, 10 of 11 do not; 14 of 16 decide.
    assert cell_decision(11, 12, rule) == ABOVE and cell_decision(10, 11, rule) is None
    assert cell_decision(14, 16, rule) == ABOVE and cell_decision(13, 15, rule) is None
