"""Chat agents (a model endpoint with tools) end to end through `proctor eval`, with what teams
moving from promptfoo combine them with: a simulated caller, a conversation seeded from a
recorded call (inline or ``file://``), weighted assertions; and the limit of five rounds of
tool calls in one turn.

The fake model server plays the agent's model, the personas and nothing else; every case
shares one batch, each routed by its ``[case:<id>]`` / ``[sim:<id>]`` tag.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import proctor_env
from conversations.recorded import EvalRun, RecordedTrial, recorded_trial, run_eval
from e2e.running import Backend, write_eval
from fakes.openai_server import FakeModelServer
from harnesses.test_chat_harness import tool_call_reply

from simulated.conftest import MODEL, model_env
from simulated.model_roles import AGENT, AGENT_MARK, SIMULATED_USER, ModelRoles, graded
from simulated.running import check_rows, score_and_threshold

AGENT_MODEL = "fake-agent"
SYSTEM_PROMPT = f"You take table bookings for Chez Proctor. {AGENT_MARK}"
RESERVED = "Table reserved for 2 on Friday 8pm. Confirmation number 4471."
RESERVE_ARGUMENTS = json.dumps({"party": 2, "time": "Friday 8pm"})
SEEDED = [
    {"role": "user", "content": "Hi, I'm Alex Thompson. [case:seeded-call]"},
    {"role": "assistant", "content": "Great, Alex! Let me walk you through our options."},
    {"role": "user", "content": "Sounds good."},
    {"role": "assistant", "content": "Which option suits you?"},
]
INLINE_SEEDED = [
    {"role": "user", "content": "Is the terrace open? [case:seeded-goodbye]"},
    {"role": "assistant", "content": "It is, from noon."},
]
PAY = "I'd like to pay with my credit card."
PERSONA = "You want to pay with your credit card ending in 4242. Give details when asked."

EVAL = f"""
import json

from proctor import assertion, case, simulated_user, suite, tool, variant


def reserve(args):
    return f"Table reserved for {{args['party']}} on {{args['time']}}. Confirmation number 4471."


reserve_table = tool(
    "reserve_table",
    description="Reserve a table at the restaurant.",
    parameters={{"type": "object",
                 "properties": {{"party": {{"type": "integer"}}, "time": {{"type": "string"}}}},
                 "required": ["party", "time"]}},
    stub=reserve,
)


def reserved_through_the_tool(ctx):
    calls = [(c["name"], json.loads(c["input"]), c["output"], c["status"])
             for turn in ctx.turns() for c in turn.tool_calls]
    return calls == [("reserve_table", {{"party": 2, "time": "Friday 8pm"}}, {RESERVED!r}, "completed")]


host = variant("chat", model={AGENT_MODEL!r}, name="host", tools=[reserve_table],
               system_prompt={SYSTEM_PROMPT!r})

bookings = suite(
    "bookings",
    prompt="{{{{request}}}}",
    cases=[
        case("book", variables={{"request": "[case:book] A table for two on Friday at 8pm, please."}},
             threshold=0.8,
             validate=[
                 assertion("icontains", "all set", weight=2, metric="disposition"),
                 assertion("not-icontains", "confirmation number", weight=3, metric="no-tool-leak"),
                 assertion("python", reserved_through_the_tool, weight=2, metric="tool-use"),
                 assertion("contains-all", ["Friday", "8pm"], weight=1, metric="knowledge-retention"),
             ]),
        case("endless-tools", variables={{"request": "[case:endless-tools] Book anything you can."}},
             validate=[assertion("icontains", "reserved")]),
        case("seeded-call", variables={{"request": "unused"}},
             user=simulated_user({PERSONA + " [sim:seeded-call]"!r}, first_message={PAY!r}, max_turns=2,
                                 initial_messages="file://transcripts/call-abc123.json"),
             validate=[assertion("turn-count", 2, metric="turn-efficiency"),
                       assertion("llm-rubric", "The agent uses the caller's name.", weight=0)]),
        case("seeded-goodbye", variables={{"request": "unused"}},
             user=simulated_user({PERSONA + " [sim:seeded-goodbye]"!r}, first_message="That's all, bye.",
                                 initial_messages={INLINE_SEEDED!r}),
             validate=[assertion("icontains", "goodbye")]),
    ],
    variants=[host],
)
"""


LAST_WORDS = "Sorry, the booking system kept me busy; could you tell me the time again?"


def always_calling_the_tool(body: dict[str, Any]) -> dict[str, Any] | str:
    """A model that calls its tool whenever it is offered one, and talks only when it is not."""
    if not body.get("tools"):
        return LAST_WORDS
    return tool_call_reply(
        ("reserve_table", RESERVE_ARGUMENTS), content="Let me check that for you."
    )


@pytest.fixture(scope="module")
def shared(module_sqlite: Backend, module_roles: ModelRoles, tmp_path_factory) -> EvalRun:
    module_roles.agent(
        "[case:book]",
        tool_call_reply(("reserve_table", RESERVE_ARGUMENTS)),
        "You're all set: Friday at 8pm, a table for two.",
    )
    # More tool calls than a turn may make: six requests with tools, then one without.
    module_roles.agent("[case:endless-tools]", *[always_calling_the_tool] * 7)
    # The agent checks its booking with the tool first: the persona must see only its words.
    module_roles.agent(
        "[case:seeded-call]",
        tool_call_reply(("reserve_table", RESERVE_ARGUMENTS)),
        "Sure. Which card would you like to use?",
        "Thank you, the card ending 4242 is charged.",
    )
    module_roles.judge("[case:seeded-call]", graded(True, 1.0, "the agent said Alex"))
    module_roles.simulated_user("[sim:seeded-call]", "The card ending in 4242.")
    module_roles.agent("[case:seeded-goodbye]", "Goodbye, Alex! ###STOP###")
    root = tmp_path_factory.mktemp("chat-project")
    folder = root / "evals" / "bookings"
    (folder / "transcripts").mkdir(parents=True)
    (folder / "transcripts" / "call-abc123.json").write_text(json.dumps(SEEDED), encoding="utf-8")
    write_eval(folder, "bookings.eval.py", EVAL)
    # Run from the project root: the file:// path is the eval file's, not the current folder's.
    return run_eval(module_sqlite, root)


def trial_of(shared: EvalRun, backend: Backend, case: str) -> RecordedTrial:
    return recorded_trial(backend, shared.batch, case)


def tool_events(trial: RecordedTrial) -> list[dict[str, Any]]:
    return [data for kind, data in trial.backend.events(trial.row["id"]) if kind == "ToolCall"]


# --- a booking tool -----------------------------------------------------------------------------


def test_the_stubs_result_goes_back_to_the_model_and_the_reply_is_the_models_words(
    shared: EvalRun, module_sqlite: Backend, module_roles: ModelRoles
) -> None:
    trial = trial_of(shared, module_sqlite, "book")

    assert trial.row["status"] == "passed"
    assert trial.turns[0]["answer"] == "You're all set: Friday at 8pm, a table for two."
    first, second = module_roles.sent(AGENT, "[case:book]")
    assert first["model"] == AGENT_MODEL
    assert first["tools"][0]["function"]["name"] == "reserve_table"
    assert first["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    call_id = second["messages"][-2]["tool_calls"][0]["id"]
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": call_id, "content": RESERVED}


def test_the_transcript_shows_the_tool_call_with_its_input_and_the_stubs_output(
    shared: EvalRun, module_sqlite: Backend
) -> None:
    trial = trial_of(shared, module_sqlite, "book")

    [call] = trial.turns[0]["tool_calls"]
    assert (call["name"], json.loads(call["input"]), call["output"], call["status"]) == (
        "reserve_table",
        {"party": 2, "time": "Friday 8pm"},
        RESERVED,
        "completed",
    )
    assert [(e["name"], e["output"]) for e in tool_events(trial)] == [("reserve_table", RESERVED)]


def test_a_chat_agents_weighted_assertions_are_stored_per_metric(
    shared: EvalRun, module_sqlite: Backend
) -> None:
    trial = trial_of(shared, module_sqlite, "book")

    assert [(c["metric"], c["weight"], c["passed"]) for c in check_rows(trial)] == [
        ("disposition", 2.0, True),
        ("no-tool-leak", 3.0, True),
        ("tool-use", 2.0, True),
        ("knowledge-retention", 1.0, True),
    ]
    assert score_and_threshold(trial) == (1.0, 0.8)


def test_a_model_still_calling_tools_after_five_rounds_is_asked_once_more_without_tools(
    shared: EvalRun, module_sqlite: Backend, module_roles: ModelRoles
) -> None:
    trial = trial_of(shared, module_sqlite, "endless-tools")

    # Five rounds of calls ran; the sixth answer's calls were not run; the seventh request
    # offered no tools, and its words are the reply.
    sent = module_roles.sent(AGENT, "[case:endless-tools]")
    assert len(sent) == 7
    assert [bool(body.get("tools")) for body in sent] == [True] * 6 + [False]
    assert [e["status"] for e in tool_events(trial)] == ["completed"] * 5 + ["skipped"]
    assert trial.turns[0]["finish_reason"] == "tool_rounds_exhausted"
    # Neither a stub's result nor the model's "let me check" is the reply.
    assert trial.turns[0]["answer"] == LAST_WORDS
    assert trial.row["status"] == "failed"
    [check] = check_rows(trial)
    assert check["message"] == "the agent never said 'reserved'"


# --- a simulated caller resuming a recorded conversation ------------------------------------------


def test_seeded_messages_reach_the_agent_first_and_do_not_count_against_max_turns(
    shared: EvalRun, module_sqlite: Backend, module_roles: ModelRoles
) -> None:
    trial = trial_of(shared, module_sqlite, "seeded-call")

    # Two seeded person messages, then two new ones: max_turns=2 counts only the new ones.
    assert trial.user_messages == [PAY, "The card ending in 4242."]
    assert (trial.row["conversation_outcome"], trial.row["stop_cause"]) == (
        "stopped",
        "max_turns_reached",
    )
    first, _after_the_tool, second = module_roles.sent(AGENT, "[case:seeded-call]")
    assert first["messages"] == [
        {"role": "system", "content": SYSTEM_PROMPT},
        *SEEDED,
        {"role": "user", "content": PAY},
    ]
    assert second["messages"][-1] == {"role": "user", "content": "The card ending in 4242."}
    assert trial.row["status"] == "passed"
    assert check_rows(trial)[0]["message"] == "2 turns (at most 2)"


def test_a_judge_grading_a_seeded_call_is_shown_the_seeded_messages(
    shared: EvalRun, module_sqlite: Backend, module_roles: ModelRoles
) -> None:
    trial = trial_of(shared, module_sqlite, "seeded-call")

    [consultation] = trial.consultations("judge")
    shown = json.dumps(consultation["prompt"])
    assert "Alex Thompson" in shown and "Which option suits you?" in shown


def test_the_persona_sees_the_seeded_conversation_from_the_persons_side(
    shared: EvalRun, module_sqlite: Backend, module_roles: ModelRoles
) -> None:
    trial = trial_of(shared, module_sqlite, "seeded-call")

    [consultation] = trial.consultations("simulated_user")
    system, *history = consultation["prompt"]
    assert PERSONA in system["content"]
    flipped = {"user": "assistant", "assistant": "user"}
    assert history == [
        *({"role": flipped[m["role"]], "content": m["content"]} for m in SEEDED),
        {"role": "assistant", "content": PAY},
        {"role": "user", "content": "Sure. Which card would you like to use?"},
    ]
    # The agent called its tool before answering: the stub's result is not the person's to read.
    assert RESERVED not in json.dumps(consultation["prompt"])
    assert [c["name"] for c in trial.turns[0]["tool_calls"]] == ["reserve_table"]
    assert trial.turn_rows()[1][2] == {"simulated_user": {"model": MODEL}}
    assert len(module_roles.sent(SIMULATED_USER, "[sim:seeded-call]")) == 1


def test_inline_seeded_messages_and_the_agents_stop_end_the_call_completed(
    shared: EvalRun, module_sqlite: Backend, module_roles: ModelRoles
) -> None:
    trial = trial_of(shared, module_sqlite, "seeded-goodbye")

    assert (trial.row["conversation_outcome"], trial.row["stop_cause"]) == ("completed", "")
    assert trial.user_messages == ["That's all, bye."]
    [sent] = module_roles.sent(AGENT, "[case:seeded-goodbye]")
    assert sent["messages"][1:] == [*INLINE_SEEDED, {"role": "user", "content": "That's all, bye."}]
    assert trial.consultations("simulated_user") == []
    assert trial.row["status"] == "passed"


def test_a_chat_tool_without_a_stub_is_refused_before_anything_runs(
    tmp_path: Path, fake_model_server: FakeModelServer
) -> None:
    backend = Backend("sqlite", proctor_env(tmp_path / "home", **model_env(fake_model_server)))
    write_eval(
        tmp_path / "evals",
        "stubless.eval.py",
        f"""
    from proctor import assertion, case, suite, tool, variant

    stubless = suite("stubless", prompt="Book me in.", cases=[
        case("book", validate=[assertion("icontains", "booked")]),
    ], variants=[variant("chat", model="fake-agent", name="host", system_prompt={SYSTEM_PROMPT!r},
                         tools=[tool("reserve_table", description="Reserve a table.")])])
    """,
    )

    result = backend.eval(tmp_path / "evals")

    assert result.returncode == 2, result.stdout + result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "reserve_table" in line and "stub" in line
    assert fake_model_server.requests == []
