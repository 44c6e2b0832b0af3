"""Conversation budgets as the reference states them: a responder's ``max_turns`` bounds the
follow-ups it writes (8 unless it says otherwise); neither the opening prompt nor the runner's
plan approval is one of them. The reference's three JSON examples, run verbatim as
``*.eval.json`` against a responder that never says done, get exactly the budget they declare;
a case whose own ``max_turns`` would cut its responder short is refused when it is loaded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e.running import Backend, write_eval

from conversations.model_script import ModelScript, answer, graded
from conversations.recorded import AGENTS, RecordedTrial, recorded_trial, run_eval
from conversations.test_json_evals import (
    APPROVAL,
    DUE_DATE,
    PLAN_MODE_EXAMPLE,
    PRICING,
    RESPONDER_EXAMPLE,
    SCRIPTED_EXAMPLE,
)

STEADY_RUN = 'python3 "$PROCTOR_PROFILE_DIR/steady.py"'
# More answers than any budget here: the responder never runs out and never says done.
NEVER_DONE = [answer(f"Thanks. One more thing, number {n}.") for n in range(1, 30)]


def steady_variants(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "variants.json").write_text(
        json.dumps(
            [
                {
                    "harness": "command",
                    "name": "steady",
                    "profile": {
                        "name": "steady",
                        "dir": str(AGENTS),
                        "run": STEADY_RUN,
                        "capabilities": ["conversation-resume", "plan-mode"],
                        "plan_file": "plans/plan.md",
                    },
                }
            ]
        )
    )


def run_example(backend: Backend, script: ModelScript, folder: Path, name: str, text: str):
    steady_variants(folder)
    (folder / name).write_text(text)
    script.responder(PRICING, *NEVER_DONE)
    script.judge(PRICING, graded(True, 0.9, "a cache was added"))
    script.judge(DUE_DATE, graded(True, 0.8, "it asked about the time zone first"))
    return run_eval(backend, folder)


def follow_ups(trial: RecordedTrial) -> list[dict]:
    """The turns the responder wrote."""
    return [turn for turn in trial.turns if "responder" in (turn["origin"] or {})]


def test_the_responder_example_gets_its_eight_follow_ups(
    sqlite_home: Backend, script: ModelScript, tmp_path: Path
) -> None:
    run = run_example(sqlite_home, script, tmp_path / "e", "caching.eval.json", RESPONDER_EXAMPLE)
    trial = recorded_trial(sqlite_home, run.batch, "add-request-caching")

    assert len(follow_ups(trial)) == 8
    assert trial.user_messages[0] == "Requests to the pricing API are slow. Can you add caching?"
    assert trial.user_messages[1:] == [f"Thanks. One more thing, number {n}." for n in range(1, 9)]
    assert trial.row["stop_cause"] == "max_turns_reached"
    # The ninth consultation found the agent still going at the bound; its answer is not sent.
    assert len(trial.consultations("responder")) == 9


def test_the_plan_mode_example_gets_eight_follow_ups_besides_the_approval(
    sqlite_home: Backend, script: ModelScript, tmp_path: Path
) -> None:
    run = run_example(sqlite_home, script, tmp_path / "e", "caching.eval.json", PLAN_MODE_EXAMPLE)
    trial = recorded_trial(sqlite_home, run.batch, "add-request-caching")

    assert trial.row["plan_state"] == "approved"
    assert trial.user_messages[1] == APPROVAL
    assert trial.turns[1]["origin"] == {"runner": "plan_approval"}
    assert len(follow_ups(trial)) == 8
    assert len(trial.user_messages) == 1 + 1 + 8
    assert trial.row["stop_cause"] == "max_turns_reached"


def test_the_scripted_example_delivers_both_of_its_turns(
    sqlite_home: Backend, script: ModelScript, tmp_path: Path
) -> None:
    run = run_example(sqlite_home, script, tmp_path / "e", "clarify.eval.json", SCRIPTED_EXAMPLE)
    trial = recorded_trial(sqlite_home, run.batch, "clarify-before-editing")

    assert trial.user_messages[1:] == [
        "The affected users are all in US timezones.",
        "It is a date-only field.",
    ]
    assert trial.row["conversation_outcome"] == "completed"


def test_a_json_responder_budget_above_eight_is_reached_without_a_case_max_turns(
    sqlite_home: Backend, script: ModelScript, tmp_path: Path
) -> None:
    bigger = RESPONDER_EXAMPLE.replace('"max_turns": 8', '"max_turns": 11')
    run = run_example(sqlite_home, script, tmp_path / "e", "caching.eval.json", bigger)
    trial = recorded_trial(sqlite_home, run.batch, "add-request-caching")

    assert len(follow_ups(trial)) == 11
    assert trial.row["stop_cause"] == "max_turns_reached"


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        (
            "budget.eval.py",
            """
            from proctor import case, command, profile, responder, suite, variant

            budget = suite(
                "budget",
                prompt="Add caching.",
                cases=[
                    case(
                        "cut-short",
                        max_turns=8,
                        user=responder(max_turns=12),
                        validate=command("true"),
                    )
                ],
                variants=[variant("command", profile=profile("p", run="true"))],
            )
            """,
            "budget.eval.py",
        ),
        (
            "budget.eval.json",
            RESPONDER_EXAMPLE.replace('"responder"', '"max_turns": 3,\n  "responder"'),
            "budget.eval.json",
        ),
    ],
)
def test_a_case_max_turns_below_its_responders_budget_is_refused_in_one_line(
    sqlite_home: Backend, tmp_path: Path, name: str, text: str, where: str
) -> None:
    folder = tmp_path / "evals"
    steady_variants(folder)
    write_eval(folder, name, text)

    result = sqlite_home.eval(folder)

    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if "unreachable" in line]
    assert where in line and "case " in line and "max_turns" in line
    assert sqlite_home.counts() == {}


def test_a_python_case_that_sets_only_its_responders_budget_gets_all_of_it(
    sqlite_home: Backend, script: ModelScript, tmp_path: Path
) -> None:
    folder = tmp_path / "evals"
    write_eval(
        folder,
        "budget.eval.py",
        f"""
        from proctor import case, command, profile, responder, suite, variant

        steady = profile(
            "steady",
            dir={str(AGENTS)!r},
            run={STEADY_RUN!r},
            capabilities=["conversation-resume"],
        )
        budget = suite(
            "budget",
            prompt="Requests to the {PRICING} are slow. Can you add caching?",
            cases=[case("long-talk", user=responder(max_turns=11), validate=command("true"))],
            variants=[variant("command", profile=steady)],
        )
        """,
    )
    script.responder(PRICING, *NEVER_DONE)

    run = run_eval(sqlite_home, folder)
    trial = recorded_trial(sqlite_home, run.batch, "long-talk")

    assert len(follow_ups(trial)) == 11
    assert trial.row["stop_cause"] == "max_turns_reached"
