"""A fake OpenAI Chat Completions API on loopback that streams and calls tools, for running the
real OpenCode (its openai-compatible provider) and Aider (through litellm).

    with FakeChatServer() as server:
        server.script(tool_call("bash", {"command": "ls"}), "All done.")
        base URL: server.url (ends in /v1)

``POST /v1/chat/completions`` answers as the request asks: ``stream: true`` gets SSE
``chat.completion.chunk`` lines ending in a usage chunk and ``data: [DONE]``; otherwise one
``chat.completion`` object. A plain string reply is the assistant's text. OpenCode also asks for
a session title on the side (a call without tools): with ``side_calls_without_tools`` those are
answered outside the script. Aider offers no tools at all, so it scripts every call.

Every scripted answer reports the same usage (:data:`USAGE_PER_CALL`; cached tokens are counted
inside ``prompt_tokens`` as OpenAI does).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from fakes.openai_server import CHAT_COMPLETIONS, ReceivedRequest
from fakes.sse_server import Reply, SseStream, StreamingModelServer

USAGE_PER_CALL = {"prompt_tokens": 100, "cached_tokens": 10, "completion_tokens": 20}
SIDE_CALL_TEXT = "Fake session title"

_ids = itertools.count(1)


def _usage() -> dict[str, Any]:
    return {
        "prompt_tokens": USAGE_PER_CALL["prompt_tokens"],
        "completion_tokens": USAGE_PER_CALL["completion_tokens"],
        "total_tokens": USAGE_PER_CALL["prompt_tokens"] + USAGE_PER_CALL["completion_tokens"],
        "prompt_tokens_details": {"cached_tokens": USAGE_PER_CALL["cached_tokens"]},
    }


def _model_of(request: Any) -> str:
    return (request.get("model") if isinstance(request, dict) else None) or "fake-model"


def _answer(text: str | None, calls: list[dict[str, Any]], request: Any) -> Any:
    """The reply to ``request`` holding ``text`` and tool ``calls``, streamed when it asked."""
    completion_id = f"chatcmpl-fake-{next(_ids):04d}"
    model = _model_of(request)
    finish = "tool_calls" if calls else "stop"
    tool_calls = [
        {
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
        }
        for call in calls
    ]
    base = {"id": completion_id, "created": int(time.time()), "model": model}
    if not (isinstance(request, dict) and request.get("stream")):
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if tool_calls:
            message["tool_calls"] = tool_calls
        return {
            **base,
            "object": "chat.completion",
            "usage": _usage(),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            **base,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant", "content": ""}))]
    if text:
        events.append((None, chunk({"content": text})))
    for index, call in enumerate(tool_calls):
        events.append((None, chunk({"tool_calls": [{"index": index, **call}]})))
    events.append((None, chunk({}, finish)))
    events.append(
        (None, {**base, "object": "chat.completion.chunk", "choices": [], "usage": _usage()})
    )
    events.append((None, "[DONE]"))
    return SseStream(events)


def text_reply(text: str, request: Any, serial: int) -> Any:
    """The route's formatter: a string reply is the assistant's text."""
    return _answer(text, [], request)


def tool_call(
    name: str, arguments: dict[str, Any], *, text: str | None = None, call_id: str | None = None
):
    """A scripted answer calling tool ``name`` with ``arguments`` (after ``text``, if any)."""
    call = {"id": call_id or f"call_fake_{next(_ids):04d}", "name": name, "arguments": arguments}

    def answer(request: Any) -> Reply:
        return Reply(body=_answer(text, [call], request))

    return answer


def is_agent_call(body: Any) -> bool:
    """Whether a request is the agent's own loop (it offers tools), not a side call."""
    return isinstance(body, dict) and bool(body.get("tools"))


class FakeChatServer(StreamingModelServer):
    def __init__(self, *, side_calls_without_tools: bool = True) -> None:
        super().__init__()
        self.side_calls_without_tools = side_calls_without_tools
        self.add_route(CHAT_COMPLETIONS, text_reply)
        self.answer_always(
            "GET",
            "/v1/models",
            lambda body: {
                "object": "list",
                "data": [
                    {
                        "id": "fake-model",
                        "object": "model",
                        "created": 0,
                        "owned_by": "proctor-tests",
                    }
                ],
            },
        )

    def _next_reply(self, request: ReceivedRequest):  # type: ignore[no-untyped-def]
        if (
            self.side_calls_without_tools
            and request.path == CHAT_COMPLETIONS
            and not is_agent_call(request.body)
        ):
            self._record(request)
            return Reply(body=_answer(SIDE_CALL_TEXT, [], request.body)), text_reply, 0
        return super()._next_reply(request)

    def agent_calls(self) -> list[Any]:
        """The bodies of the agent's own model calls, in order."""
        return [
            r.body
            for r in self.requests_to(CHAT_COMPLETIONS)
            if is_agent_call(r.body) or not self.side_calls_without_tools
        ]

    def unused(self) -> int:
        return self.unused_replies(CHAT_COMPLETIONS)


@pytest.fixture(name="chat_server")
def chat_server_fixture() -> Iterator[FakeChatServer]:
    """A started FakeChatServer (import this function into a test module to use it)."""
    with FakeChatServer() as server:
        yield server
