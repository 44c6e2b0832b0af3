"""A fake Anthropic Messages API on loopback, streaming, for running the real Claude Code CLI.

    with FakeAnthropicServer() as server:
        server.script(tool_use("Bash", {"command": "ls"}), "All done.")
        env = {"ANTHROPIC_BASE_URL": server.root_url, "ANTHROPIC_API_KEY": "test-key"}

Claude Code calls ``POST /v1/messages?beta=true`` with ``stream: true`` and reads the
``message_start`` ... ``message_stop`` events; a plain string reply becomes a text answer. It also
sends ``HEAD /`` and may count tokens: both are answered outside the script. Calls made on the
side without the agent's tools (a title, a topic check) get a short fixed text and never consume
the script, so a test scripts only the agent's own turns.

Every scripted answer reports the same usage (:data:`USAGE_PER_CALL`), so a test can predict
the totals Claude Code adds up in its ``result`` line.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from fakes.sse_server import Reply, SseStream, StreamingModelServer

MESSAGES = "/v1/messages"
COUNT_TOKENS = "/v1/messages/count_tokens"

USAGE_PER_CALL = {
    "input_tokens": 100,
    "cache_read_input_tokens": 20,
    "cache_creation_input_tokens": 10,
    "output_tokens": 15,
}
SIDE_CALL_TEXT = "ok"

_ids = itertools.count(1)


def _message_stream(blocks: list[dict[str, Any]], *, model: str, stop_reason: str) -> SseStream:
    message_id = f"msg_fake_{next(_ids):04d}"
    start_usage = {**USAGE_PER_CALL, "output_tokens": 1}
    events: list[tuple[str | None, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
        ),
    ]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            events += [
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": block["text"]},
                    },
                ),
            ]
        else:
            events += [
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {
                            "type": "tool_use",
                            "id": block["id"],
                            "name": block["name"],
                            "input": {},
                        },
                    },
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {
                            "type": "input_json_delta",
                            "partial_json": json.dumps(block["input"]),
                        },
                    },
                ),
            ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": USAGE_PER_CALL["output_tokens"]},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return SseStream(events)


def _model_of(request: Any) -> str:
    return (request.get("model") if isinstance(request, dict) else None) or "claude-fake"


def text_stream(text: str, request: Any, serial: int) -> SseStream:
    """The route's formatter: a string reply is an assistant message holding ``text``."""
    return _message_stream(
        [{"type": "text", "text": text}], model=_model_of(request), stop_reason="end_turn"
    )


def tool_use(
    name: str, tool_input: dict[str, Any], *, text: str | None = None, call_id: str | None = None
):
    """A scripted answer asking to run tool ``name`` with ``tool_input`` (after ``text``, if any)."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks.append(
        {
            "type": "tool_use",
            "id": call_id or f"toolu_fake_{next(_ids):04d}",
            "name": name,
            "input": tool_input,
        }
    )

    def answer(request: Any) -> Reply:
        return Reply(body=_message_stream(blocks, model=_model_of(request), stop_reason="tool_use"))

    return answer


def write_plan_where_told(plan: str):
    """A scripted answer playing the model in plan mode: it writes ``plan`` with the Write tool to
    the plan file Claude Code names in its plan-mode reminder (``~/.claude/plans/<name>.md``)."""

    def answer(request: Any) -> Any:
        match = re.search(
            r"(/[^\s\"\\]*/\.claude/plans/[\w.-]+\.md)", json.dumps(request["messages"])
        )
        assert match, "the planning request names no plan file"
        return tool_use("Write", {"file_path": match.group(1), "content": plan})(request)

    return answer


def is_agent_call(body: Any) -> bool:
    """Whether a request is the agent's own loop (it offers tools), not a side call."""
    return isinstance(body, dict) and bool(body.get("tools"))


class FakeAnthropicServer(StreamingModelServer):
    def __init__(self) -> None:
        super().__init__()
        self.add_route(MESSAGES, text_stream)
        self.answer_always("POST", COUNT_TOKENS, lambda body: {"input_tokens": 100})
        self.answer_always("HEAD", "/", lambda body: None)

    def script(self, *replies: Any, route: str = MESSAGES) -> None:
        super().script(*replies, route=route)

    def _next_reply(self, request):  # type: ignore[no-untyped-def]
        if request.path == MESSAGES and not is_agent_call(request.body):
            self._record(request)
            return Reply(text=SIDE_CALL_TEXT), text_stream, 0
        return super()._next_reply(request)

    def agent_calls(self) -> list[Any]:
        """The bodies of the agent's own model calls, in order."""
        return [r.body for r in self.requests_to(MESSAGES) if is_agent_call(r.body)]

    def unused(self) -> int:
        return self.unused_replies(MESSAGES)


@pytest.fixture(name="anthropic_server")
def anthropic_server_fixture() -> Iterator[FakeAnthropicServer]:
    """A started FakeAnthropicServer (import this function into a test module to use it)."""
    with FakeAnthropicServer() as server:
        yield server
