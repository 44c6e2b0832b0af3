"""Variant against variant within one batch, as `proctor compare BATCH --variants A B` shows it
and its --json carries it: each variant's clustered interval, the paired difference with its
interval and the McNemar test, the cases by difference, the power line, pass@k and pass^k. The
batch is the worked example of docs/compare.md (tests/compare/test_error_bars.py has its
arithmetic)."""

from __future__ import annotations

import json
import math

import pytest
from django.core.management import call_command

from compare.seeding import F, P, Seed
from evals_app.models import Trial
from evals_app.variant_comparison import UnknownVariant, compare_variants

pytestmark = pytest.mark.django_db

CAREFUL = {"add": [P, P, F], "divide": [F, F, F], "parse": [P, P, P], "sort": [P, F, F]}
HASTY = {"add": [P, P, P], "divide": [F, F, P], "parse": [P, P, P], "sort": [P, P, P]}
SE_DIFFERENCE = math.sqrt(1 / 54)


@pytest.fixture
def seed() -> Seed:
    return Seed()


@pytest.fixture
def batch(seed):
    cells = {(case, "careful"): trials for case, trials in CAREFUL.items()}
    cells |= {(case, "hasty"): trials for case, trials in HASTY.items()}
    return seed.batch(cells, label="two agents")


def _compare(capsys, *args: str) -> str:
    call_command("compare", *args, "--org", "acme")
    return capsys.readouterr().out


def test_each_variant_has_its_mean_and_case_clustered_interval(batch):
    comparison = compare_variants(batch)
    careful, hasty = comparison.variants
    assert (careful.variant, careful.cases, careful.trials) == ("careful", 4, 12)
    assert careful.estimate.mean == pytest.approx(0.5)
    assert careful.estimate.standard_error == pytest.approx(math.sqrt(5 / 108))
    assert hasty.estimate.mean == pytest.approx(5 / 6)
    assert careful.measure == "mean pass rate"


def test_the_pair_shows_the_paired_difference_which_holds_and_mcnemar_beside_it(batch):
    (pair,) = compare_variants(batch).pairs
    assert (pair.a, pair.b) == ("careful", "hasty")
    assert pair.estimate.mean == pytest.approx(1 / 3)
    low, high = pair.estimate.interval
    assert low == pytest.approx(1 / 3 - 1.959964 * SE_DIFFERENCE)
    assert high == pytest.approx(1 / 3 + 1.959964 * SE_DIFFERENCE)
    assert pair.holds and pair.leader == "hasty"
    # By majority only sort changes (1/3 -> 3/3): one discordant case, p = 1.
    assert pair.only_a == [] and pair.only_b == ["calc/sort"]
    assert pair.p_value == 1.0 and not pair.significant
    # Cases by difference, where hasty trails careful most first.
    assert [c.case for c in pair.cases] == ["parse", "add", "divide", "sort"]


def test_the_headline_names_the_winner_and_says_it_holds(batch):
    assert compare_variants(batch).headline == (
        "hasty beats careful by 33.3 points over 4 shared cases "
        "(95% interval +6.7 to +60.0 for hasty − careful): the difference holds."
    )


def test_the_power_line_says_what_the_cases_and_trials_can_find(batch):
    (pair,) = compare_variants(batch, difference=0.10).pairs
    power = pair.power
    assert (power.cases, power.trials) == (4, 3)
    assert power.components.within == pytest.approx(0.25)
    assert power.minimum_detectable == pytest.approx(2.801585 * math.sqrt(1 / 48), rel=1e-5)
    # 10 points: 0.25 / (4 * 0.01 / 7.848879) = 49.06 -> 50 trials; or 7.848879 * (0.25 / 3)
    # / 0.01 = 65.4 -> 66 cases at 3 trials.
    assert power.trials_needed == 50 and power.cases_needed == 66
    assert power.sentence == "10 points needs 50 trials per case, or 66 cases at 3 trials"


def test_a_batch_with_one_variant_invents_nothing(seed):
    alone = seed.batch({("add", "careful"): [P, F, P], ("sort", "careful"): [P, P, P]})
    comparison = compare_variants(alone)
    assert comparison.pairs == []
    assert comparison.headline == "Only careful ran: there is no other variant to compare with."
    assert comparison.to_dict()["pairs"] == []


def test_only_the_cases_both_ran_are_paired(seed):
    made = seed.batch(
        {
            ("add", "careful"): [P, P],
            ("add", "hasty"): [F, F],
            ("sort", "careful"): [P, P],
            ("sort", "hasty"): [P, F],
            ("parse", "hasty"): [P, P],
        }
    )
    (pair,) = compare_variants(made).pairs
    assert [c.case for c in pair.cases] == ["add", "sort"]
    assert pair.estimate.mean == pytest.approx(-0.75)


def test_weighted_cases_are_compared_by_their_mean_score(seed):
    made = seed.batch(
        {("add", "careful"): [P, F], ("sort", "careful"): [P, P], ("add", "hasty"): [P, P]}
    )
    Trial.objects.filter(run__batch=made, run__variant__name="careful").update(score=0.5)
    careful = compare_variants(made, ["careful", "hasty"]).variants[0]
    assert careful.measure == "mean score"
    assert careful.estimate.mean == pytest.approx(0.5)


def test_an_unknown_variant_is_named(batch):
    with pytest.raises(UnknownVariant, match="ran no variant 'nimble' \\(it ran careful, hasty\\)"):
        compare_variants(batch, ["careful", "nimble"])


def test_the_cli_table_shows_intervals_the_difference_the_test_and_the_power(batch, capsys):
    out = _compare(capsys, str(batch.pk), "--variants", "careful", "hasty")
    assert "hasty beats careful by 33.3 points" in out
    assert "50.0% [7.8%–92.2%]" in out  # careful's clustered interval
    assert "+33.3 pts [+6.7, +60.0]" in out
    assert "40.4 pts" in out  # detectable at 80% power
    assert (
        "Enough trials? careful → hasty: 10 points needs 50 trials per case, or 66 cases at 3 "
        "trials." in out
    )
    assert "pass@3 1.00 · pass^3 0.75" in out  # hasty: (1 + 1 + 1 + 1) / 4, (1 + 0 + 1 + 1) / 4
    assert f"/batches/{batch.pk}/variants/" in out


def test_the_cli_json_carries_every_number(batch, capsys):
    data = json.loads(_compare(capsys, str(batch.pk), "--variants", "hasty", "careful", "--json"))
    assert [v["variant"] for v in data["variants"]] == ["hasty", "careful"]
    (pair,) = data["pairs"]
    assert (pair["a"], pair["b"]) == ("hasty", "careful")  # the order asked for: B - A
    assert pair["difference"]["mean"] == pytest.approx(-1 / 3, abs=1e-4)
    assert pair["holds"] is True and pair["leader"] == "hasty"
    assert pair["mcnemar"] == {
        "only_a": ["calc/sort"],
        "only_b": [],
        "p_value": 1.0,
        "significant": False,
    }
    assert pair["power"]["trials_needed"] == 50
    careful = data["variants"][1]
    assert careful["interval"] == [pytest.approx(0.0783, abs=1e-4), pytest.approx(0.9217, abs=1e-4)]
    assert careful["pass_at_k"] == {"1": 0.5, "2": pytest.approx(0.6667, abs=1e-4), "3": 0.75}
    add = next(c for c in pair["cases"] if c["case"] == "add")
    assert add["b"]["pass_hat_k"] == {
        "1": pytest.approx(0.6667, abs=1e-4),
        "2": pytest.approx(0.3333, abs=1e-4),
        "3": 0.0,
    }


def test_the_cli_refuses_a_variant_the_batch_did_not_run(batch, capsys):
    with pytest.raises(SystemExit) as exited:
        _compare(capsys, str(batch.pk), "--variants", "careful", "nimble")
    assert exited.value.code == 2
    assert "--variants: batch" in capsys.readouterr().err


def test_the_cli_refuses_two_batch_options_with_variants(batch, capsys):
    with pytest.raises(SystemExit) as exited:
        _compare(capsys, str(batch.pk), "--variants", "--fail-on-regression")
    assert exited.value.code == 2
    assert "--fail-on-regression compares two batches" in capsys.readouterr().err
