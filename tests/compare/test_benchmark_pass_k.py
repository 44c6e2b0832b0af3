"""benchmark.json carries pass@k and pass^k per cell and per variant; a 2/3 cell shows the
formula values and is marked flaky."""

from __future__ import annotations

import pytest

from compare.seeding import F, P, Seed
from evals_app.flakiness import flaky_cells
from runner.jobs.benchmark import summarize

pytestmark = pytest.mark.django_db


def test_a_two_in_three_cell_has_the_formula_values_and_is_flaky():
    seed = Seed()
    batch = seed.batch({("fix-add", "careful"): [P, P, F], ("fix-divide", "careful"): [P, P, P]})

    summary = summarize(batch)

    cells = {c["case"]: c for c in summary["cells"]}
    two_of_three = cells["fix-add"]
    # pass@1 = 2/3; pass@3 = 1 - C(1,3)/C(3,3) = 1; pass^3 = C(2,3)/C(3,3) = 0.
    assert two_of_three["pass_at_k"] == {"1": 0.6667, "2": 1.0, "3": 1.0}
    assert two_of_three["pass_hat_k"] == {"1": 0.6667, "2": 0.3333, "3": 0.0}
    variant = summary["variants"]["careful"]
    assert variant["pass_at_k"] == {"1": 0.8333, "2": 1.0, "3": 1.0}
    assert variant["pass_hat_k"] == {"1": 0.8333, "2": 0.6667, "3": 0.5}
    (history,) = flaky_cells(batch).values()
    assert history.case == "fix-add"
