"""promptfoo's derivedMetrics expressions over a variant's summed named scores: mathjs's
arithmetic, and nothing else of Python."""

from __future__ import annotations

import pytest

from evals_app.metric_expressions import UnusableExpression, metric_value


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 * p * r / (p + r)", 2 * 3 * 2 / 5),
        ("p ^ 2 - r % 2", 9.0),
        ("sqrt(p * 3) + Math.max(p, r) + -r", 3 + 3 - 2),
        ("unknown + 1", 1.0),  # a metric the variant has no score for is 0
    ],
)
def test_it_computes_the_expression_over_the_sums(expression: str, value: float) -> None:
    assert metric_value(expression, {"p": 3.0, "r": 2.0}) == pytest.approx(value)


def test_a_ratio_with_nothing_under_it_has_no_value() -> None:
    assert metric_value("tp / (tp + fp)", {"tp": 0.0, "fp": 0.0}) is None


@pytest.mark.parametrize(
    "expression",
    ["__import__('os').system('true')", "p.__class__", "[p]", "p if r else 0", "True + 1", "p +"],
)
def test_anything_but_arithmetic_is_refused_in_one_line(expression: str) -> None:
    with pytest.raises(UnusableExpression) as refused:
        metric_value(expression, {"p": 1.0, "r": 1.0})
    assert "\n" not in str(refused.value)
