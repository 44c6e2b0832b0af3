"""Comparing two batches seeded with a planted regression: the regression comes first with its
interval, the headline counts it, the paired test runs per variant, reruns merge."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from compare.seeding import E, F, P, Seed
from evals_app.comparison import baseline_comparisons, compare_batches, suite_baseline

pytestmark = pytest.mark.django_db


@pytest.fixture
def seed() -> Seed:
    return Seed()


def _planted(seed: Seed):
    """fix-add × careful drops from 3/3 to 0/3; fix-divide × hasty rises from 1/3 to 3/3;
    explain-add is steady."""
    a = seed.batch(
        {
            ("fix-add", "careful"): [P, P, P],
            ("fix-divide", "hasty"): [P, F, F],
            ("explain-add", "careful"): [P, P, F],
            ("explain-add", "hasty"): [F, F, F],
        },
        label="before",
    )
    b = seed.batch(
        {
            ("fix-add", "careful"): [F, F, F],
            ("fix-divide", "hasty"): [P, P, P],
            ("explain-add", "careful"): [P, P, F],
            ("explain-add", "hasty"): [F, F, F],
        },
        label="after",
    )
    return a, b


def test_the_planted_regression_comes_first_with_its_interval(seed):
    a, b = _planted(seed)

    comparison = compare_batches(a, b)

    first = comparison.cells[0]
    assert (first.case, first.variant, first.change) == ("fix-add", "careful", "regression")
    assert first.significant
    assert first.a.tally.passed == 3 and first.b.tally.passed == 0
    assert first.delta == pytest.approx(-1.0)
    low, high = first.delta_interval
    assert low == pytest.approx(-1.0) and high < 0
    assert first.a.interval[0] == pytest.approx(0.4385, abs=1e-4)  # Wilson 3/3
    second = comparison.cells[1]
    assert (second.case, second.change, second.significant) == ("fix-divide", "improvement", False)
    assert [c.change for c in comparison.cells[2:]] == ["same", "same"]


def test_the_headline_counts_cases_regressions_and_significance(seed):
    a, b = _planted(seed)

    comparison = compare_batches(a, b)

    # fix-add lost, fix-divide gained (1/3 -> 3/3): as many passing cases either way.
    assert comparison.headline == (
        "B passes as many cases as A; 1 regression, 1 significant; 1 improvement, 0 significant"
    )
    assert comparison.has_significant_regression
    assert compare_batches(b, a).headline.startswith("B passes as many cases as A; 1 regression")


def test_the_headline_says_more_and_fewer():
    seed = Seed()
    a = seed.batch({("x", "v"): [F], ("y", "v"): [F]})
    b = seed.batch({("x", "v"): [P], ("y", "v"): [P]})
    assert compare_batches(a, b).headline.startswith("B passes 2 more cases than A; 0 regressions")
    assert compare_batches(b, a).headline.startswith("B passes 2 fewer cases than A; 2 regressions")


def test_each_variant_gets_an_exact_mcnemar_test_on_majority_outcomes(seed):
    cases = [f"case-{i}" for i in range(10)]
    # careful: case-0 passes only in A; case-1..9 pass only in B (b=1, c=9, p = 0.02148).
    a = seed.batch({(c, "careful"): [P, P, F] if c == "case-0" else [F, F, P] for c in cases})
    b = seed.batch({(c, "careful"): [F, F, F] if c == "case-0" else [P, P, P] for c in cases})

    (variant,) = compare_batches(a, b).variants

    assert variant.shared_cases == 10
    assert variant.only_a == ["calc/case-0"]
    assert len(variant.only_b) == 9
    assert round(variant.p_value, 5) == 0.02148
    assert variant.significant and not variant.significant_regression
    assert round(compare_batches(b, a).variants[0].p_value, 5) == 0.02148
    assert compare_batches(b, a).variants[0].significant_regression


def test_cells_run_on_one_side_only_are_listed_last_and_warned_about(seed):
    a = seed.batch({("fix-add", "careful"): [P], ("gone", "careful"): [P]})
    b = seed.batch({("fix-add", "careful"): [P], ("new", "careful"): [F]})

    comparison = compare_batches(a, b)

    assert [c.change for c in comparison.cells] == ["same", "only_in_a", "only_in_b"]
    (warning,) = comparison.warnings
    assert warning.kind == "cells"
    assert "calc/gone × careful" in warning.message and "calc/new × careful" in warning.message


def test_a_rerun_of_failures_is_merged_into_its_batch(seed):
    a = seed.batch({("fix-add", "careful"): [P, P, P]})
    b = seed.batch({("fix-add", "careful"): [P, E, F]})
    seed.batch({("fix-add", "careful"): [P, P]}, parent=b, label="rerun of failed trials")

    merged = compare_batches(a, b)
    alone = compare_batches(a, b, merged=False)
    everything = compare_batches(a, b, mode="all")

    assert merged.cells[0].b.tally.passed == 3 and merged.cells[0].change == "same"
    assert alone.cells[0].b.tally.passed == 1 and alone.cells[0].change == "regression"
    assert everything.cells[0].b.tally.total == 5


def test_the_suite_baseline_is_one_batch_per_suite(seed):
    first = seed.batch({("fix-add", "careful"): [P]})
    second = seed.batch({("fix-add", "careful"): [F]})
    other = seed.batch({("hello", "careful"): [P]}, suite="greeter")

    assert suite_baseline(seed.org, "calc") is None
    first.mark_baseline()
    other.mark_baseline()
    assert suite_baseline(seed.org, "calc") == first
    second.mark_baseline()

    first.refresh_from_db()
    other.refresh_from_db()
    assert suite_baseline(seed.org, "calc") == second
    assert not first.is_baseline
    assert other.is_baseline  # another suite's baseline is left alone
    assert suite_baseline(seed.org, "greeter") == other


def test_comparing_with_the_suite_baselines_names_the_suites_without_one(seed):
    baseline = seed.batch({("fix-add", "careful"): [P, P, P]})
    baseline.mark_baseline()
    b = seed.batch({("fix-add", "careful"): [F, F, F]})
    seed.batch({("hello", "careful"): [P]}, suite="greeter")
    both = seed.batch({("fix-add", "careful"): [F, F, F], ("hello", "careful"): [P]})

    (comparison,), missing = baseline_comparisons(b)
    assert comparison.a == baseline and missing == []
    assert comparison.has_significant_regression

    comparisons, missing = baseline_comparisons(both)
    assert missing == ["greeter"]
    assert {c.suite for c in comparisons[0].cells} == {"calc"}


def test_to_dict_carries_cells_variants_warnings_and_methods(seed):
    a, b = _planted(seed)

    data = compare_batches(a, b).to_dict()

    assert data["a"]["label"] == "before" and data["b"]["label"] == "after"
    assert data["cells"][0]["case"] == "fix-add"
    assert data["cells"][0]["delta_interval"][1] < 0
    assert data["cells"][0]["a"]["interval"] == [0.4385, 1.0]
    assert data["significant_regressions"] == 1
    assert "McNemar" in data["method"]["paired_test"]
    assert {v["variant"] for v in data["variants"]} == {"careful", "hasty"}


def test_the_number_of_queries_does_not_grow_with_the_batches():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from evals_app.flakiness import flaky_cells

    counts = []
    for size in (2, 20):
        seed = Seed(slug=f"org-{size}")
        cells = {(f"case-{i}", v): [P, F, P] for i in range(size) for v in ("careful", "hasty")}
        a, b = seed.batch(cells), seed.batch(cells)
        with CaptureQueriesContext(connection) as compared:
            compare_batches(a, b).to_dict()
        with CaptureQueriesContext(connection) as flaky:
            assert len(flaky_cells(b)) == size * 2
        counts.append((len(compared), len(flaky)))
    assert counts[0] == counts[1]


def test_compare_json_has_pass_at_k_and_pass_hat_k_per_variant_and_cell(seed, capsys):
    # A: 2 of 3 passed, pass@k = 2/3, 1, 1 and pass^k = 2/3, 1/3, 0. B: 1 of 3 passed,
    # pass@k = 1/3, 2/3, 1 and pass^k = 1/3, 0, 0 (the grid's estimators).
    a = seed.batch({("add", "careful"): [P, P, F]})
    b = seed.batch({("add", "careful"): [P, F, F]})
    call_command("compare", str(a.pk), str(b.pk), "--json", "--org", "acme")
    data = json.loads(capsys.readouterr().out)
    (variant,) = data["variants"]
    assert variant["a"]["pass_at_k"] == {"1": 0.6667, "2": 1.0, "3": 1.0}
    assert variant["b"]["pass_hat_k"] == {"1": 0.3333, "2": 0.0, "3": 0.0}
    (cell,) = data["cells"]
    assert cell["a"]["pass_hat_k"] == {"1": 0.6667, "2": 0.3333, "3": 0.0}
    assert cell["b"]["pass_at_k"] == {"1": 0.3333, "2": 0.6667, "3": 1.0}


def test_the_compare_table_shows_pass_at_k_per_variant(seed, capsys):
    a = seed.batch({("add", "careful"): [P, P, F]})
    b = seed.batch({("add", "careful"): [P, F, F]})
    call_command("compare", str(a.pk), str(b.pk), "--org", "acme")
    assert "@3 1.00 ^3 0.00 → @3 1.00 ^3 0.00" in capsys.readouterr().out
