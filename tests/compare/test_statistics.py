"""The estimators and the paired test against values computed by hand, published references and
brute-force enumeration."""

from __future__ import annotations

import itertools
import math

import pytest

from evals_app.estimators import (
    mcnemar_exact,
    mean_pass_k_curves,
    pass_at_k,
    pass_hat_k,
    pass_k_curves,
    rate_difference_interval,
    wilson_interval,
)


def _enumerated(n: int, c: int, k: int) -> tuple[float, float]:
    """pass@k and pass^k by drawing every k-subset of n trials of which the first c passed."""
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    any_pass = sum(1 for s in subsets if any(s)) / len(subsets)
    all_pass = sum(1 for s in subsets if all(s)) / len(subsets)
    return any_pass, all_pass


@pytest.mark.parametrize("n", range(1, 8))
def test_pass_at_k_and_pass_hat_k_match_enumerating_every_subset(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            any_pass, all_pass = _enumerated(n, c, k)
            assert pass_at_k(n, c, k) == pytest.approx(any_pass)
            assert pass_hat_k(n, c, k) == pytest.approx(all_pass)


def test_a_cell_with_two_passes_in_three_has_the_formula_values():
    # pass@1 = c/n; pass@3 = 1 - C(1,3)/C(3,3) = 1; pass^3 = C(2,3)/C(3,3) = 0; pass^2 = 1/3.
    assert pass_at_k(3, 2, 1) == pytest.approx(2 / 3)
    assert pass_at_k(3, 2, 3) == 1.0
    assert pass_hat_k(3, 2, 3) == 0.0
    assert pass_hat_k(3, 2, 2) == pytest.approx(1 / 3)
    curves = pass_k_curves(3, 2)
    assert curves["pass@k"] == pytest.approx({1: 2 / 3, 2: 1.0, 3: 1.0})
    assert curves["pass^k"] == pytest.approx({1: 2 / 3, 2: 1 / 3, 3: 0.0})


def test_pass_at_k_of_the_codex_paper_example():
    # n=200, c=10, k=100 by the numerically stable product form of Chen et al. (2021).
    stable = 1.0 - math.prod(1.0 - 100 / i for i in range(200 - 10 + 1, 200 + 1))
    assert pass_at_k(200, 10, 100) == pytest.approx(stable)


def test_k_outside_one_to_n_is_refused():
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_hat_k(3, 4, 1)


def test_a_variant_averages_its_cells_up_to_the_smallest_trial_count():
    curves = mean_pass_k_curves([(3, 2), (2, 0), (0, 0)])
    assert set(curves["pass@k"]) == {1, 2}
    assert curves["pass@k"][1] == pytest.approx((2 / 3 + 0) / 2)
    assert curves["pass^k"][2] == pytest.approx((1 / 3 + 0) / 2)


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        (1, 9, 22 / 1024),  # 2 * (C(10,0) + C(10,1)) / 2^10 = 0.021484
        (0, 5, 2 / 32),  # 0.0625: five flips one way are not enough at 5%
        (0, 6, 2 / 64),  # 0.03125
        (3, 3, 1.0),
        (2, 0, 0.5),
        (0, 0, 1.0),
    ],
)
def test_exact_mcnemar_matches_hand_computed_binomial_tails(b, c, expected):
    assert mcnemar_exact(b, c) == pytest.approx(expected)
    assert mcnemar_exact(c, b) == pytest.approx(expected)


def test_mcnemar_b1_c9_is_the_published_0_02148():
    assert round(mcnemar_exact(1, 9), 5) == 0.02148


@pytest.mark.parametrize(
    ("passed", "total", "low", "high"),
    [
        # Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I,
        # method 3 (the Wilson score interval).
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_interval_matches_newcombes_table(passed, total, low, high):
    got = wilson_interval(passed, total)
    assert got == pytest.approx((low, high), abs=5e-5)


def test_wilson_interval_of_nothing_is_uninformative_and_bad_counts_are_refused():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="passed <= total"):
        wilson_interval(4, 3)


def test_newcombe_difference_interval_matches_the_published_example():
    # Newcombe (1998), "Interval estimation for the difference between independent
    # proportions", example (a): 56/70 - 48/80, method 10: 0.0524 to 0.3339.
    low, high = rate_difference_interval(48, 80, 56, 70)
    assert (low, high) == pytest.approx((0.0524, 0.3339), abs=5e-5)


def test_newcombe_difference_interval_is_symmetric_and_bounded():
    low, high = rate_difference_interval(56, 70, 48, 80)
    assert (low, high) == pytest.approx((-0.3339, -0.0524), abs=5e-5)
    # 3/3 against 0/3 is a significant drop; 1/1 against 0/1 is not.
    assert rate_difference_interval(3, 3, 0, 3)[1] < 0
    assert rate_difference_interval(1, 1, 0, 1)[1] > 0
    assert rate_difference_interval(0, 0, 1, 1) == (-1.0, 1.0)
