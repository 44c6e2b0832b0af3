"""A chat agent with a booking tool, end to end through `proctor eval`: the fake model server
plays the agent, calls the tool, gets the stub's result back and answers in words; a follow-up
turn continues the conversation; validators read the tool calls from the transcript."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import proctor_env
from e2e.running import Backend, only_run, write_eval
from fakes.openai_server import FakeModelServer

from harnesses.test_chat_harness import tool_call_reply

WORKER_KEY = "sk-chat-agent-key-held-by-the-worker"
BOOKED = "Appointment confirmed for Tuesday 3pm. Calendar invite sent."

EVAL = """
import json

from proctor import Verdict, case, suite, tool, turns, variant


def schedule(args):
    return f"Appointment confirmed for {{args.get('date', 'the requested time')}}. Calendar invite sent."


booking = tool(
    "schedule_appointment",
    description="Book an appointment at the clinic.",
    parameters={{"type": "object", "properties": {{"date": {{"type": "string"}}}}, "required": ["date"]}},
    stub=schedule,
)

booker = variant("chat", model="gpt-fake-agent", name="booker", tools=[booking],
                 system_prompt="You book appointments for Acme Dental.",
                 base_url={url!r}, api_key="$PROCTOR_E2E_CHAT_KEY")


def booked_through_the_tool(ctx):
    calls = [(c["name"], json.loads(c["input"]), c["output"], c["status"])
             for turn in ctx.turns() for c in turn.tool_calls]
    expected = [("schedule_appointment", {{"date": "Tuesday 3pm"}}, {booked!r}, "completed")]
    return Verdict(calls == expected, f"tool calls: {{calls}}")


def answered_in_its_own_words(ctx):
    first, second = ctx.turns()
    return (first.answer == "You're booked for Tuesday at 3pm."
            and second.answer == "Tuesday at 3pm. See you then!"
            and {booked!r} not in ctx.transcript())


bookings = suite(
    "bookings",
    prompt="{{{{request}}}}",
    cases=[case("book", variables={{"request": "Can I come in on Tuesday at 3pm?"}},
                user=turns("Thanks! What time was that again?"),
                validate=[booked_through_the_tool, answered_in_its_own_words])],
    variants=[booker],
)
"""


def booking_agent(body: dict[str, Any]) -> Any:
    """The agent's model: books when asked for a time, then answers from what it knows."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return "You're booked for Tuesday at 3pm."
    if "Tuesday" in last["content"]:
        return tool_call_reply(("schedule_appointment", json.dumps({"date": "Tuesday 3pm"})))
    return "Tuesday at 3pm. See you then!"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as fake:
        yield fake


@pytest.fixture(scope="module")
def batch(server: FakeModelServer, tmp_path_factory) -> tuple[Backend, dict[str, Any]]:
    server.script(*[booking_agent] * 3)  # the tool call, the first answer, the follow-up's answer
    project = tmp_path_factory.mktemp("project")
    write_eval(project, "bookings.eval.py", EVAL.format(url=server.url, booked=BOOKED))
    backend = Backend(
        "sqlite",
        proctor_env(tmp_path_factory.mktemp("proctor-home"), PROCTOR_E2E_CHAT_KEY=WORKER_KEY),
    )
    return backend, backend.eval_json(project)


def test_the_validators_read_the_tool_call_and_the_models_own_answers(
    batch, server: FakeModelServer
) -> None:
    _, report = batch

    (trial,) = only_run(report, "book")["trials"]

    assert trial["status"] == "passed", trial
    assert [(c["name"], c["passed"]) for c in trial["checks"]] == [
        ("booked_through_the_tool", True),
        ("answered_in_its_own_words", True),
    ]
    assert trial["answer"] == "Tuesday at 3pm. See you then!"
    assert server.unused_replies() == 0


def test_the_stubs_result_goes_back_to_the_model_and_the_follow_up_carries_the_conversation(
    batch, server: FakeModelServer
) -> None:
    first, second, third = (request.body for request in server.requests)

    assert first["tools"][0]["function"]["name"] == "schedule_appointment"
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_0_schedule_appointment",
        "content": BOOKED,
    }
    assert [m["role"] for m in third["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert server.requests[0].headers["authorization"] == f"Bearer {WORKER_KEY}"


def test_the_recorded_events_show_the_call_with_its_input_and_output(batch) -> None:
    backend, report = batch
    (trial_id,) = backend.trial_ids(report["batch"])

    events = backend.events(trial_id)

    tool_calls = [data for kind, data in events if kind == "ToolCall"]
    assert [(c["name"], c["input"], c["output"]) for c in tool_calls] == [
        ("schedule_appointment", '{"date": "Tuesday 3pm"}', BOOKED)
    ]
    replies = [
        data["text"] for kind, data in events if kind == "Message" and data["role"] == "assistant"
    ]
    assert replies == ["You're booked for Tuesday at 3pm.", "Tuesday at 3pm. See you then!"]
    assert WORKER_KEY not in backend.all_text()
