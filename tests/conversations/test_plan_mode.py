"""Plan mode end to end through `proctor eval`: the plan is presented (by the harness's plan
file, or by the responder's done), approved with the one fixed message, and implemented in the
same session in act mode; a session that never leaves planning is recorded as such.

Three suites share one batch, each under its own variant so benchmark.json's warnings can be
told apart: the plan file written, the plan file never written, and the responder deciding.
"""

from __future__ import annotations

import json

import pytest
from e2e.running import Backend, write_eval
from fakes.openai_server import FakeModelServer

from conversations.model_script import RESPONDER, ModelScript, answer, done
from conversations.recorded import (
    RecordedTrial,
    benchmark,
    recorded_trial,
    responder_texts,
    run_eval,
    talker_profile,
)

APPROVAL = "The plan is approved. Implement it now."
PLAN = "# Plan\n\n1. Add an in-memory cache in cache.py.\n2. Keep the API unchanged.\n"
STORAGE_QUESTION = "Which storage should the cache use: memory (recommended) or redis?"

PLAN_EVAL = f"""
from proctor import case, command, profile, responder, suite, variant

with_plan_file = {talker_profile(plan_file="plans/plan.md")}
with_plan_folder = {talker_profile(plan_file="plans")}
without_plan_file = {talker_profile()}


def request(case_id, markers):
    return {{"request": f"[case:{{case_id}}] {{markers}} Requests to the pricing API are slow. Can you add caching?"}}


approved = suite(
    "plans-approved",
    prompt="{{{{request}}}}",
    cases=[case("plan-file", variables=request("plan-file", "[plan-file]"), plan_mode=True,
                validate=command("test -f cache.py"))],
    variants=[variant("command", profile=with_plan_file, name="plan-file")],
)

in_folder = suite(
    "plans-in-folder",
    prompt="{{{{request}}}}",
    cases=[case("plan-folder", variables=request("plan-folder", "[plan-file]"), plan_mode=True,
                validate=command("test -f cache.py"))],
    variants=[variant("command", profile=with_plan_folder, name="plan-folder")],
)

missing = suite(
    "plans-missing",
    prompt="{{{{request}}}}",
    cases=[case("no-plan-file", variables=request("no-plan-file", "[never-plan]"), plan_mode=True,
                validate=command("true"))],
    variants=[variant("command", profile=with_plan_file, name="plan-file-never-written")],
)

by_responder = suite(
    "plans-by-responder",
    prompt="{{{{request}}}}",
    cases=[
        case("responder-plan", variables=request("responder-plan", "[ask-in-plan]"), plan_mode=True,
             user=responder(), validate=command("test -f cache.py")),
        case("never-plans", variables=request("never-plans", "[never-plan]"), plan_mode=True,
             user=responder(max_turns=2), validate=command("true")),
        case("one-budget", variables=request("one-budget", "[ask-in-plan] [ask]"), plan_mode=True,
             user=responder(max_turns=1), validate=command("true")),
    ],
    variants=[variant("command", profile=without_plan_file, name="responder-decides")],
)
"""


@pytest.fixture(scope="module")
def plan_script(module_server: FakeModelServer) -> ModelScript:
    script = ModelScript().install(module_server)
    script.responder(
        "[case:responder-plan]",
        answer("Memory, as you recommend.", "the agent recommended memory"),
        done("the agent presented a complete plan"),
        done("the cache is implemented"),
    )
    script.responder(
        "[case:never-plans]", answer("Take your time."), answer("Keep reading."), answer("Go on.")
    )
    script.responder(
        "[case:one-budget]",
        answer("Memory, as you recommend."),
        done("the plan is complete"),
        answer("In memory."),
    )
    return script


@pytest.fixture(scope="module")
def plan_batch(module_sqlite: Backend, plan_script: ModelScript, tmp_path_factory):
    folder = tmp_path_factory.mktemp("plans")
    write_eval(folder, "plans.eval.py", PLAN_EVAL)
    return run_eval(module_sqlite, folder, "-j", "2")


def planned(backend: Backend, batch, case_id: str) -> RecordedTrial:
    return recorded_trial(backend, batch.batch, case_id)


def test_a_written_plan_file_is_approved_with_the_fixed_message_and_implemented(
    module_sqlite, plan_batch
) -> None:
    trial = planned(module_sqlite, plan_batch, "plan-file")

    assert trial.row["status"] == "passed"
    assert trial.row["conversation_outcome"] == "completed"
    assert trial.artifact("outputs/plan.md") == PLAN
    assert trial.user_messages[1:] == [APPROVAL]
    assert [(turn["mode"], turn["origin"]) for turn in trial.turns] == [
        ("plan", {}),
        ("act", {"runner": "plan_approval"}),
    ]
    assert trial.conversation["plan"] == {
        "state": "approved",
        "signal": "plan_file",
        "presented_round": 0,
        "approval_round": 1,
    }
    assert [(origin, mode) for _, _, origin, mode in trial.turn_rows()] == [
        ({}, "plan"),
        ({"runner": "plan_approval"}, "act"),
    ]
    assert (trial.row["plan_state"], trial.row["plan_signal"]) == ("approved", "plan_file")
    assert "cache.py" in trial.artifact("workspace.diff")
    # One native session across both phases.
    assert len({session for _, session in trial.started_session_ids()}) == 1


def test_a_plan_file_declared_as_a_folder_presents_its_newest_file(
    module_sqlite, plan_batch
) -> None:
    # As Claude Code writes ~/.claude/plans/<name>.md.
    trial = planned(module_sqlite, plan_batch, "plan-folder")

    assert trial.row["conversation_outcome"] == "completed"
    assert trial.conversation["plan"]["signal"] == "plan_file"
    assert trial.artifact("outputs/plan.md") == PLAN
    assert trial.user_messages[1:] == [APPROVAL]


def test_writes_refused_while_planning_are_recorded_as_plan_mode_denials(
    module_sqlite, plan_batch
) -> None:
    trial = planned(module_sqlite, plan_batch, "plan-file")

    denials = json.loads(trial.artifact("permission-denials.json"))
    assert [(d["tool"], d["turn"], d["mode"], d["plan_mode_attributed"]) for d in denials] == [
        ("write_file", 0, "plan", True)
    ]
    # The mode refusing a write is the mode working: no validity warning.
    assert "plan-file" not in benchmark(module_sqlite, plan_batch.batch)["validity_warnings"]


def test_the_responders_done_presents_the_plan_when_the_harness_writes_no_plan_file(
    module_sqlite, plan_batch, plan_script
) -> None:
    trial = planned(module_sqlite, plan_batch, "responder-plan")

    assert trial.row["conversation_outcome"] == "completed"
    assert trial.user_messages[1:] == ["Memory, as you recommend.", APPROVAL]
    assert [turn["mode"] for turn in trial.turns] == ["plan", "plan", "act"]
    assert trial.turns[1]["origin"]["responder"]["reason"] == "the agent recommended memory"
    assert trial.turns[2]["origin"] == {"runner": "plan_approval"}
    assert trial.conversation["plan"] == {
        "state": "approved",
        "signal": "responder",
        "presented_round": 1,
        "approval_round": 2,
    }
    assert trial.artifact("outputs/plan.md") == PLAN
    assert "cache.py" in trial.artifact("workspace.diff")

    # The responder is told the agent is planning while it plans, and not once it acts.
    sent = plan_script.sent(RESPONDER, "[case:responder-plan]")
    assert len(sent) == 3
    planning_system, _ = responder_texts(sent[0])
    acting_system, acting_user = responder_texts(sent[2])
    assert planning_system == responder_texts(sent[1])[0]
    assert (
        planning_system != acting_system
        and "plan" in planning_system.replace(acting_system, "").lower()
    )
    assert "Done: added an in-memory cache" in acting_user


def test_a_plan_mode_run_that_never_presents_a_plan_runs_out_of_turns_in_planning(
    module_sqlite, plan_batch
) -> None:
    trial = planned(module_sqlite, plan_batch, "never-plans")

    assert trial.row["stop_cause"] == "max_turns_reached"
    assert trial.row["plan_state"] == "planning"
    assert trial.user_messages[1:] == ["Take your time.", "Keep reading."]
    assert {turn["mode"] for turn in trial.turns} == {"plan"}
    assert not trial.has_artifact("outputs/plan.md")


def test_a_declared_plan_file_never_written_without_a_responder_stops_as_plan_not_presented(
    module_sqlite, plan_batch
) -> None:
    trial = planned(module_sqlite, plan_batch, "no-plan-file")

    assert trial.row["conversation_outcome"] == "stopped"
    assert trial.row["stop_cause"] == "plan_not_presented"
    assert trial.conversation["stop_cause"] == "plan_not_presented"
    assert trial.conversation["plan"]["state"] == "planning"
    assert trial.user_messages == [
        "[case:no-plan-file] [never-plan] Requests to the pricing API are slow. "
        "Can you add caching?"
    ]


def test_planning_answers_count_toward_the_responders_one_budget(module_sqlite, plan_batch) -> None:
    trial = planned(module_sqlite, plan_batch, "one-budget")

    # One follow-up allowed: spent while planning, so the act-phase question goes unanswered.
    assert trial.row["plan_state"] == "approved"
    assert trial.row["stop_cause"] == "max_turns_reached"
    assert trial.user_messages[1:] == ["Memory, as you recommend.", APPROVAL]


def test_runs_that_never_left_planning_are_counted_per_variant(module_sqlite, plan_batch) -> None:
    warnings = benchmark(module_sqlite, plan_batch.batch)["validity_warnings"]

    assert warnings["plan-file-never-written"] == {"never_left_planning": 1}
    assert warnings["responder-decides"] == {"max_turns_reached": 2, "never_left_planning": 1}
    printed = plan_batch.result.stdout
    assert "never_left_planning × 1" in printed
