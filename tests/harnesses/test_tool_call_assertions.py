"""``is-valid-openai-tools-call`` and ``is-valid-openai-function-call`` on a chat agent, through
`proctor eval`: the calls the agent made are checked against the tools its variant declares, by
name and by each tool's parameter schema, as promptfoo checks an OpenAI provider's calls."""

from __future__ import annotations

import json
from typing import Any

from conftest import proctor_env
from e2e.running import Backend, only_run, write_eval
from fakes.openai_server import FakeModelServer

from harnesses.test_chat_harness import tool_call_reply

EVAL = """
from proctor import assertion, case, suite, tool, variant

booking = tool(
    "schedule_appointment",
    parameters={{"type": "object", "properties": {{"date": {{"type": "string"}}}},
                "required": ["date"], "additionalProperties": False}},
    stub=lambda args: "Booked.",
)

bookings = suite(
    "bookings",
    prompt="{{{{request}}}}",
    cases=[
        case(name, variables={{"request": name}}, validate=[
            assertion("is-valid-openai-tools-call"),
            assertion("is-valid-openai-function-call"),
        ])
        for name in ("good-call", "unknown-tool", "wrong-arguments", "no-call")
    ],
    variants=[variant("chat", model="gpt-fake-agent", tools=[booking], base_url={url!r})],
)
"""

CALLS = {
    "good-call": ("schedule_appointment", {"date": "Tuesday"}),
    "unknown-tool": ("cancel_appointment", {"date": "Tuesday"}),
    "wrong-arguments": ("schedule_appointment", {"day": "Tuesday"}),
}


def agent(body: dict[str, Any]) -> Any:
    """Calls the tool the case's name says (once), then answers in words."""
    last = body["messages"][-1]
    if last["role"] == "tool" or last["content"] not in CALLS:
        return "Done."
    name, arguments = CALLS[last["content"]]
    return tool_call_reply((name, json.dumps(arguments)))


def test_tool_calls_are_checked_against_the_declared_tools(tmp_path) -> None:
    with FakeModelServer() as server:
        server.script(*[agent] * 7)
        write_eval(tmp_path / "project", "bookings.eval.py", EVAL.format(url=server.url))
        backend = Backend("sqlite", proctor_env(tmp_path / "home"))
        report = backend.eval_json(tmp_path / "project")

    def checks(case: str) -> list[tuple[bool, str]]:
        (trial,) = only_run(report, case)["trials"]
        return [(c["passed"], c["message"]) for c in trial["checks"]]

    assert checks("good-call") == [
        (True, "1 call(s) match the declared tools"),
        (True, "1 call(s) match the declared tools"),
    ]
    for passed, message in checks("unknown-tool"):
        assert not passed
        assert message.startswith("called 'cancel_appointment', but no tool has that name")
    for passed, message in checks("wrong-arguments"):
        assert not passed
        assert message.startswith("the call to schedule_appointment does not match its schema")
    assert checks("no-call") == [(False, "the agent called no tool")] * 2
