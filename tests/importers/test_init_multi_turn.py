"""`proctor init --multi-turn`: a starter file of four simulated callers against a chat agent
with a booking tool, weighted assertions and a 0.6 threshold, that `proctor eval` accepts; plain
`proctor init`: a first eval that passes as written; an existing file is never overwritten."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from importers.conftest import Proctor, load_valid_suites, ruff_problems
from proctor.assertions import Assertion
from proctor.tools import Tool


def test_it_writes_a_starter_that_loads_and_passes_the_rules(proctor: Proctor) -> None:
    run = proctor("init", "--multi-turn", "-o", "evals")

    assert run.returncode == 0, run.stderr
    path = proctor.cwd / "evals" / "multi-turn.eval.py"
    assert run.stdout.splitlines()[0] == (
        "Wrote evals/multi-turn.eval.py: four simulated callers against a chat agent with a booking tool."
    )
    suite = load_valid_suites(path)["multi-turn-starter"]
    assert [c.id for c in suite.cases] == [
        "interested-lead",
        "skeptical-lead",
        "firm-refusal",
        "resumed-mid-conversation",
    ]
    assert all(
        c.threshold == 0.6 and c.user.instructions and c.user.first_message for c in suite.cases
    )
    resumed = suite.cases[-1]
    assert [role for role, _ in resumed.user.initial_messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert all(not c.user.initial_messages for c in suite.cases[:-1])

    weights = [
        (a.type, a.value, a.weight, a.metric)
        for a in suite.cases[0].checks
        if a.metric != "disposition-outcome"
    ]
    assert weights[0] == ("not-icontains", "[object Object]", 3, "no-json-leak")
    assert [(kind, weight, metric) for kind, _value, weight, metric in weights[1:]] == [
        ("llm-rubric", 2, "tone"),
        ("llm-rubric", 1.5, "role-adherence"),
        ("llm-rubric", 1.5, "knowledge-retention"),
        ("llm-rubric", 0.5, "closing-attempt"),
        ("turn-count", 0.5, "turn-efficiency"),
        ("latency", 0, "latency"),
    ]
    outcomes = [c.checks[-1] for c in suite.cases]
    assert all(
        isinstance(o, Assertion) and (o.type, o.weight) == ("llm-rubric", 2) for o in outcomes
    )
    assert len({o.value for o in outcomes}) == 4

    (variant,) = suite.variants
    assert variant.harness == "chat" and "###STOP###" in variant.options["system_prompt"]
    (booking,) = variant.options["tools"]
    assert isinstance(booking, Tool) and booking.name == "schedule_demo"
    assert booking.stub({"time": "Thursday 2pm"}).startswith("Demo booked for Thursday 2pm.")
    assert ruff_problems(path) == ""


def test_it_refuses_to_overwrite_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "multi-turn.eval.py"
    path.write_text("# mine\n")
    stderr = io.StringIO()

    with pytest.raises(SystemExit) as exit_:
        call_command(
            "init", "--multi-turn", "-o", str(tmp_path), stdout=io.StringIO(), stderr=stderr
        )

    assert exit_.value.code == 2
    assert (
        stderr.getvalue().strip()
        == f"{path} already exists; remove it first or write elsewhere with -o."
    )
    assert path.read_text() == "# mine\n"


def test_it_writes_to_a_named_file(tmp_path: Path) -> None:
    call_command(
        "init", "--multi-turn", "-o", str(tmp_path / "sales.eval.py"), stdout=io.StringIO()
    )
    assert "multi-turn-starter" in load_valid_suites(tmp_path / "sales.eval.py")


def test_plain_init_writes_a_first_eval_that_passes_as_written(proctor: Proctor) -> None:
    """Before, plain `proctor init` wrote nothing and asked for --multi-turn."""
    run = proctor("init")

    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "Wrote first.eval.py: two cases and a stand-in agent; it runs as written, then put your "
        "agent in.",
        "Run it with: proctor eval first.eval.py",
    ]
    path = proctor.cwd / "first.eval.py"
    assert ruff_problems(path) == ""
    done = proctor("eval", "--json")
    assert done.returncode == 0, done.stderr
    trials = [t for run in json.loads(done.stdout)["runs"] for t in run["trials"]]
    assert [t["status"] for t in trials] == ["passed"] * 4
    assert {c["message"] for t in trials for c in t["checks"]} == {
        "add(2, 3) printed '5'",
        "exited 0",
    }
    again = proctor("init")
    assert again.returncode == 2
    assert again.stderr.strip() == (
        "first.eval.py already exists; remove it first or write elsewhere with -o."
    )
