"""What a trial costs: the variant's prices, else what the harness reported (Claude Code's
total_cost_usd, OpenCode's per-step cost, a command agent's costUsd), else the settings' price
table; summed per cell and batch, and per passed trial."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import override_settings

from compare.seeding import F, P, Seed
from evals_app.cost import batch_cost, format_usd, run_costs, trial_cost_usd, variant_costs
from proctor.protocol import parse_line
from runner.core.transcript import TurnTranscript
from runner.harnesses.claude_code.stream import ClaudeStreamParser
from runner.harnesses.opencode.harness import OpenCodeStreamParser

FIXTURES = Path(__file__).resolve().parent.parent / "harnesses" / "fixtures"
USAGE = {"input_tokens": 2_000_000, "output_tokens": 500_000, "cache_read_tokens": 1_000_000}


def test_claude_codes_reported_cost_reaches_the_usage_event():
    lines = (FIXTURES / "claude_tool_turn.jsonl").read_text().splitlines()
    reported = json.loads(lines[-1])["total_cost_usd"]
    parser = ClaudeStreamParser()
    events = [e for line in lines for e in parser.feed(line)] + parser.finish()

    (usage,) = [e for e in events if e.kind == "Usage"]
    assert usage.data["cost_usd"] == pytest.approx(reported)
    turn = TurnTranscript(index=0, prompt="")
    for event in events:
        turn.add(event)
    assert turn.cost_usd == pytest.approx(reported)


def test_opencodes_per_step_cost_is_summed():
    parser = OpenCodeStreamParser(cwd="/work", model="fake/fake-model")
    events = []
    for cost in (0.002, 0.0035):
        step = {"reason": "stop", "cost": cost, "tokens": {"input": 10, "output": 5}}
        events += parser.feed(json.dumps({"type": "step_finish", "sessionID": "s", "part": step}))
    turn = TurnTranscript(index=0, prompt="")
    for event in events:
        turn.add(event)
    assert [e.data["cost_usd"] for e in events if e.kind == "Usage"] == [0.002, 0.0035]
    assert turn.cost_usd == pytest.approx(0.0055)
    assert parser.usage["input_tokens"] == 20  # the cost is not summed into the token counts


def test_a_command_agents_cost_usd_is_read_and_a_bad_one_refused():
    good = parse_line('{"_tag":"Usage","inputTokens":10,"outputTokens":2,"costUsd":0.25}')
    assert good.kind == "Usage" and good.data["cost_usd"] == 0.25
    bad = parse_line('{"_tag":"Usage","inputTokens":10,"outputTokens":2,"costUsd":-1}')
    assert bad.kind == "ProtocolError" and "costUsd" in bad.data["error"]
    without = parse_line('{"_tag":"Usage","inputTokens":10,"outputTokens":2}')
    assert "cost_usd" not in without.data


@pytest.mark.django_db
def test_the_variants_prices_win_then_the_report_then_the_table():
    seed = Seed()
    priced = seed.variant("priced", prices={"input_per_mtok": 3, "output_per_mtok": 15})
    plain = seed.variant("plain", model="claude-sonnet-4")

    # 2 Mtok x $3 + 0.5 Mtok x $15 = $13.5, whatever the harness said.
    assert trial_cost_usd(priced, USAGE, reported=0.5) == pytest.approx(13.5)
    assert trial_cost_usd(plain, USAGE, reported=0.5) == 0.5
    assert trial_cost_usd(plain, USAGE, reported=None) is None
    table = {"claude-sonnet-4": {"input_per_mtok": 3, "cache_read_per_mtok": 0.3}}
    with override_settings(PROCTOR_PRICES=table):
        assert trial_cost_usd(plain, USAGE, reported=None) == pytest.approx(6.3)


@pytest.mark.django_db
def test_costs_sum_per_cell_variant_and_batch_with_cost_per_pass():
    seed = Seed()
    batch = seed.batch(
        {("fix-add", "careful"): [P, P, F], ("fix-add", "hasty"): [F, F]}, cost_usd=0.01
    )

    total = batch_cost(batch)
    assert total.trials == 5 and total.costed == 5 and total.passed == 2
    assert total.total_usd == pytest.approx(0.05)
    assert total.per_passed_trial_usd == pytest.approx(0.025)
    by_run = {s.trials: s for s in run_costs(batch).values()}
    assert by_run[3].per_passed_trial_usd == pytest.approx(0.015)
    assert by_run[2].per_passed_trial_usd is None  # no pass: no cost per pass
    assert sorted(s.trials for s in variant_costs(batch).values()) == [2, 3]


@pytest.mark.django_db
def test_unknown_cost_is_not_zero():
    seed = Seed()
    batch = seed.batch({("fix-add", "careful"): [P]})
    summary = batch_cost(batch)
    assert summary.total_usd is None and not summary.complete
    assert format_usd(summary.total_usd) == "—"
    assert format_usd(0.01234) == "$0.0123" and format_usd(12.5) == "$12.50"
