"""Scripted turns end to end through `proctor eval`: each turn is delivered in order when its
gate holds; an unmet gate stops the conversation with its cause; a script longer than the case
allows is cut at ``max_turns``. No model is involved, so none is configured."""

from __future__ import annotations

import pytest
from conftest import proctor_env
from e2e.running import Backend, write_eval

from conversations.recorded import (
    RecordedTrial,
    benchmark,
    recorded_trial,
    run_eval,
    talker_profile,
)

# case id -> (opening markers, user=..., extra case arguments)
SCRIPTS = {
    "always": ("[statement]", 'turns("Use memory.")', ""),
    # The turns as one list, as a reader of promptfoo's configs writes them.
    "listed": ("[statement]", 'turns(["Use memory.", "Add a test."])', ""),
    "asks": (
        "[ask]",
        'turns(turn("In memory.", deliver_when="agent_asks", agent_response_matches="(?i)redis"))',
        "",
    ),
    "did-not-ask": ("[statement]", 'turns(turn("In memory.", deliver_when="agent_asks"))', ""),
    "asked-only-once": (
        "[ask]",
        'turns(turn("In memory.", deliver_when="agent_asks"), '
        'turn("Anything else?", deliver_when="agent_asks"))',
        "",
    ),
    "mismatch": (
        "[ask]",
        'turns(turn("US time zones.", deliver_when="agent_asks", '
        'agent_response_matches="(?i)time ?zone"))',
        "",
    ),
    # max_turns counts the follow-ups, not the opening prompt: two of the three are sent.
    "longer-than-allowed": ("[ask-forever]", 'turns("One.", "Two.", "Three.")', ", max_turns=2"),
}


def scripted_eval() -> str:
    cases = "\n".join(
        f"        case({case_id!r}, variables={{'request': '[case:{case_id}] {markers} add caching'}}, "
        f"user={user}{extra}, validate=command('true')),"
        for case_id, (markers, user, extra) in SCRIPTS.items()
    )
    return (
        "from proctor import case, command, profile, suite, turn, turns, variant\n\n"
        f"talker = {talker_profile()}\n\n"
        "scripted = suite(\n"
        "    'scripted',\n"
        "    prompt='{{request}}',\n"
        "    cases=[\n"
        f"{cases}\n"
        "    ],\n"
        "    variants=[variant('command', profile=talker)],\n"
        ")\n"
    )


@pytest.fixture(scope="module")
def scripted_backend(tmp_path_factory) -> Backend:
    # No PROCTOR_LLM_*: a script needs no model.
    return Backend("sqlite", proctor_env(tmp_path_factory.mktemp("proctor-home")))


@pytest.fixture(scope="module")
def scripted_batch(scripted_backend: Backend, tmp_path_factory):
    folder = tmp_path_factory.mktemp("scripted")
    write_eval(folder, "scripted.eval.py", scripted_eval())
    return run_eval(scripted_backend, folder, "-j", "2")


def scripted(backend: Backend, batch, case_id: str) -> RecordedTrial:
    return recorded_trial(backend, batch.batch, case_id)


def test_an_always_turn_is_delivered_whatever_the_agent_said(
    scripted_backend, scripted_batch
) -> None:
    trial = scripted(scripted_backend, scripted_batch, "always")

    assert trial.row["conversation_outcome"] == "completed"
    assert trial.user_messages[1:] == ["Use memory."]
    # Authored turns carry no origin.
    assert [turn["origin"] for turn in trial.turns] == [{}, {}]
    assert "cache.py" in trial.artifact("workspace.diff")


def test_turns_given_as_one_list_are_each_delivered(scripted_backend, scripted_batch) -> None:
    trial = scripted(scripted_backend, scripted_batch, "listed")

    assert trial.row["conversation_outcome"] == "completed"
    assert trial.user_messages[1:] == ["Use memory.", "Add a test."]


def test_an_agent_asks_turn_is_delivered_after_a_question_that_matches(
    scripted_backend, scripted_batch
) -> None:
    trial = scripted(scripted_backend, scripted_batch, "asks")

    assert trial.row["conversation_outcome"] == "completed"
    assert trial.user_messages[1:] == ["In memory."]
    assert trial.turns[1]["origin"] == {}


def test_an_agent_asks_turn_after_a_statement_stops_as_agent_did_not_ask(
    scripted_backend, scripted_batch
) -> None:
    trial = scripted(scripted_backend, scripted_batch, "did-not-ask")

    assert trial.row["conversation_outcome"] == "stopped"
    assert trial.row["stop_cause"] == "agent_did_not_ask"
    assert trial.conversation["stop_cause"] == "agent_did_not_ask"
    assert trial.user_messages[1:] == []
    assert trial.row["status"] == "passed"


def test_each_gate_reads_the_agents_latest_answer(scripted_backend, scripted_batch) -> None:
    trial = scripted(scripted_backend, scripted_batch, "asked-only-once")

    assert trial.row["stop_cause"] == "agent_did_not_ask"
    assert trial.user_messages[1:] == ["In memory."]


def test_an_answer_the_regex_does_not_match_stops_as_agent_response_mismatch(
    scripted_backend, scripted_batch
) -> None:
    trial = scripted(scripted_backend, scripted_batch, "mismatch")

    assert trial.row["stop_cause"] == "agent_response_mismatch"
    assert trial.user_messages[1:] == []


def test_a_script_longer_than_max_turns_stops_at_the_bound(
    scripted_backend, scripted_batch
) -> None:
    trial = scripted(scripted_backend, scripted_batch, "longer-than-allowed")

    assert trial.row["stop_cause"] == "max_turns_reached"
    assert trial.user_messages[1:] == ["One.", "Two."]


def test_only_the_truncated_script_is_a_validity_warning(scripted_backend, scripted_batch) -> None:
    # An agent that did not ask is a result about the agent, not a threat to the comparison.
    assert benchmark(scripted_backend, scripted_batch.batch)["validity_warnings"] == {
        "command:talker": {"max_turns_reached": 1}
    }
