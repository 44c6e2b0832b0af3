"""The estimators of variant against variant (Miller 2024, "Adding Error Bars to Evals"), the
power calculation and Cohen's kappa, against values worked out by hand (each test shows the
arithmetic) and a published example. docs/compare.md walks through the same numbers."""

from __future__ import annotations

import math

import pytest

from evals_app.estimators import (
    POWER_80,
    Agreement,
    VarianceComponents,
    cases_needed,
    clustered_mean,
    minimum_detectable_difference,
    paired_difference,
    trials_needed,
    variance_components,
)

# Four cases, three trials each: the worked example of docs/compare.md.
A = [[1, 1, 0], [0, 0, 0], [1, 1, 1], [1, 0, 0]]  # case means 2/3, 0, 1, 1/3
B = [[1, 1, 1], [0, 0, 1], [1, 1, 1], [1, 1, 1]]  # case means 1, 1/3, 1, 1


def test_the_clustered_standard_error_is_the_spread_of_case_means():
    # Mean of case means: (2/3 + 0 + 1 + 1/3) / 4 = 1/2. Deviations +1/6, -1/2, +1/2, -1/6;
    # squares sum to 1/36 + 1/4 + 1/4 + 1/36 = 5/9; over C - 1 = 3: 5/27; over C = 4: 5/108.
    estimate = clustered_mean(A)
    assert estimate.mean == pytest.approx(0.5)
    assert estimate.cases == 4
    assert estimate.standard_error == pytest.approx(math.sqrt(5 / 108))  # 0.2152
    low, high = estimate.interval
    assert low == pytest.approx(0.5 - 1.959964 * math.sqrt(5 / 108))  # 0.078
    assert high == pytest.approx(0.5 + 1.959964 * math.sqrt(5 / 108))  # 0.922


def test_clustering_widens_the_interval_that_twelve_independent_trials_would_give():
    # Read as 12 independent trials, 6 passes: sqrt(0.25 / 12) = 0.144 < 0.215.
    assert clustered_mean(A).standard_error > math.sqrt(0.25 / 12)


def test_equal_cases_have_no_spread_and_one_case_has_no_interval():
    assert clustered_mean([[1, 1], [1, 1]]).interval == (1.0, 1.0)
    lonely = clustered_mean([[1, 0, 1]])
    assert lonely.mean == pytest.approx(2 / 3)
    assert lonely.standard_error is None and lonely.interval is None


def test_the_interval_stays_inside_zero_and_one():
    low, high = clustered_mean([[1], [0], [1], [1]]).interval
    # 0.75 +- 1.96 * sqrt((3 * 1/16 + 9/16) / 3 / 4) = 0.75 +- 0.49: the top is cut at 1.
    assert high == 1.0 and low == pytest.approx(0.75 - 1.959964 * 0.25)


def test_the_paired_difference_is_the_clustered_mean_of_per_case_differences():
    # Differences B - A per case: 1/3, 1/3, 0, 2/3; mean 1/3. Deviations 0, 0, -1/3, +1/3:
    # squares 2/9, over 3 = 2/27, over 4 = 1/54; SE = sqrt(1/54) = 0.1361.
    estimate = paired_difference(list(zip(A, B, strict=True)))
    assert estimate.mean == pytest.approx(1 / 3)
    assert estimate.standard_error == pytest.approx(math.sqrt(1 / 54))
    low, high = estimate.interval
    assert low == pytest.approx(1 / 3 - 1.959964 * math.sqrt(1 / 54))  # 0.067: holds
    assert high == pytest.approx(1 / 3 + 1.959964 * math.sqrt(1 / 54))  # 0.600
    assert low > 0


def test_pairing_is_tighter_than_two_independent_clustered_means():
    # Unpaired, the variances add: 5/108 + var(B)/4. B's case means 1, 1/3, 1, 1 have mean 5/6
    # and squares 3 * 1/36 + 1/4 = 1/3, over 3 = 1/9, over 4 = 1/36.
    unpaired = math.sqrt(5 / 108 + 1 / 36)
    assert paired_difference(list(zip(A, B, strict=True))).standard_error < unpaired


def test_variance_components_split_the_spread_between_cases_and_trials():
    # Per-trial variances (n - 1): A's cases 1/3, 0, 0, 1/3 (mean 1/6); B's 0, 1/3, 0, 0 (1/12).
    # within = 1/6 + 1/12 = 1/4. The trials' share of a case's difference at 3 trials is 1/12,
    # more than the observed 2/27: nothing is left between cases (floored at 0).
    components = variance_components(list(zip(A, B, strict=True)))
    assert components.within == pytest.approx(1 / 4)
    assert components.between == 0.0


def test_the_minimum_detectable_difference_at_80_percent_power():
    # (1.959964 + 0.841621) * sqrt((0 + (1/4) / 3) / 4) = 2.801585 * sqrt(1/48) = 0.4044.
    components = VarianceComponents(between=0.0, within=0.25)
    assert pytest.approx(2.801585, abs=1e-6) == POWER_80
    assert minimum_detectable_difference(components, cases=4, trials=3) == pytest.approx(
        2.801585 * math.sqrt(1 / 48), rel=1e-6
    )


def test_trials_needed_for_a_chosen_difference():
    # 0.3 over 4 cases: trials >= within / (C * d^2 / 2.8016^2 - between)
    # = 0.25 / (4 * 0.09 / 7.848879) = 0.25 / 0.045866 = 5.45, so 6 trials per case.
    components = VarianceComponents(between=0.0, within=0.25)
    assert trials_needed(components, cases=4, difference=0.3) == 6
    assert minimum_detectable_difference(components, 4, 6) <= 0.3
    assert minimum_detectable_difference(components, 4, 5) > 0.3


def test_when_cases_differ_too_much_no_number_of_trials_is_enough():
    # between alone: 2.8016^2 * 0.04 / 4 = 0.0785 > 0.1^2: the floor is above 10 points.
    components = VarianceComponents(between=0.04, within=0.25)
    assert trials_needed(components, cases=4, difference=0.1) is None
    # Cases needed at 3 trials: 7.848879 * (0.04 + 0.25 / 3) / 0.01 = 96.8, so 97 cases.
    assert cases_needed(components, trials=3, difference=0.1) == 97


def test_cohens_kappa_of_the_published_example():
    # Wikipedia's "Cohen's kappa" example: 50 proposals, both yes 20, A yes B no 5, A no B yes
    # 10, both no 15: po = 0.7, pe = 0.5 * 0.6 + 0.5 * 0.4 = 0.5, kappa = 0.4.
    agreement = Agreement(both_pass=20, judge_only=5, person_only=10, both_fail=15)
    assert agreement.n == 50
    assert agreement.observed == pytest.approx(0.7)
    assert agreement.kappa == pytest.approx(0.4)


def test_true_positive_and_true_negative_rates_by_hand():
    # Of 18 trials people passed the judge passed 15 (TPR 0.833); of 12 they failed, the judge
    # failed 10 (TNR 0.833). po = 25/30; pe = 17/30 * 18/30 + 13/30 * 12/30 = 462/900;
    # kappa = (750/900 - 462/900) / (438/900) = 288/438 = 0.6575.
    agreement = Agreement(both_pass=15, judge_only=2, person_only=3, both_fail=10)
    assert agreement.true_positive_rate == pytest.approx(15 / 18)
    assert agreement.true_negative_rate == pytest.approx(10 / 12)
    assert agreement.kappa == pytest.approx(288 / 438)


def test_kappa_without_labels_or_with_one_verdict_throughout():
    assert Agreement(0, 0, 0, 0).kappa is None
    assert Agreement(both_pass=5, judge_only=0, person_only=0, both_fail=0).kappa == 1.0
    assert Agreement(0, 0, 0, 0).true_positive_rate is None
