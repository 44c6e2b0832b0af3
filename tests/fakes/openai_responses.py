"""A fake OpenAI Responses API on loopback, streaming, for running the real Codex CLI.

    with FakeResponsesServer() as server:
        server.script(function_call("exec_command", {"cmd": "ls"}), "All done.")
        provider base URL: server.url (ends in /v1)

Codex only speaks the Responses API (``POST {base_url}/responses`` with ``stream: true``) and
reads ``response.created`` ... ``response.completed``; a plain string reply becomes an assistant
message. A model list asked for with ``GET /v1/models`` is answered outside the script, and so
are calls made on the side without the agent's tools.

Every scripted answer reports the same usage (:data:`USAGE_PER_CALL`, cached tokens counted
inside ``input_tokens`` as OpenAI does).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest

from fakes.sse_server import Reply, SseStream, StreamingModelServer

RESPONSES = "/v1/responses"

USAGE_PER_CALL = {
    "input_tokens": 120,
    "cached_tokens": 20,
    "output_tokens": 30,
    "reasoning_tokens": 0,
}
SIDE_CALL_TEXT = "ok"

_ids = itertools.count(1)


def _response_stream(items: list[dict[str, Any]], *, model: str) -> SseStream:
    response_id = f"resp_fake_{next(_ids):04d}"
    base = {"id": response_id, "object": "response", "model": model, "created_at": 0}
    events: list[tuple[str | None, Any]] = [
        (
            "response.created",
            {
                "type": "response.created",
                "response": {**base, "status": "in_progress", "output": []},
            },
        ),
    ]
    done_items = []
    for index, item in enumerate(items):
        if item["type"] == "message":
            item_id = f"msg_fake_{next(_ids):04d}"
            text = item["text"]
            added = {
                "type": "message",
                "id": item_id,
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            done = {
                "type": "message",
                "id": item_id,
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
            events += [
                (
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": index, "item": added},
                ),
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item_id,
                        "output_index": index,
                        "content_index": 0,
                        "delta": text,
                    },
                ),
            ]
        else:
            item_id = f"fc_fake_{next(_ids):04d}"
            done = {
                "type": "function_call",
                "id": item_id,
                "call_id": item["call_id"],
                "name": item["name"],
                "arguments": json.dumps(item["arguments"]),
                "status": "completed",
            }
            events.append(
                (
                    "response.output_item.added",
                    {
                        "type": "response.output_item.added",
                        "output_index": index,
                        "item": {**done, "arguments": "", "status": "in_progress"},
                    },
                )
            )
        events.append(
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": index, "item": done},
            )
        )
        done_items.append(done)
    usage = {
        "input_tokens": USAGE_PER_CALL["input_tokens"],
        "input_tokens_details": {"cached_tokens": USAGE_PER_CALL["cached_tokens"]},
        "output_tokens": USAGE_PER_CALL["output_tokens"],
        "output_tokens_details": {"reasoning_tokens": USAGE_PER_CALL["reasoning_tokens"]},
        "total_tokens": USAGE_PER_CALL["input_tokens"] + USAGE_PER_CALL["output_tokens"],
    }
    events.append(
        (
            "response.completed",
            {
                "type": "response.completed",
                "response": {**base, "status": "completed", "output": done_items, "usage": usage},
            },
        )
    )
    return SseStream(events)


def _model_of(request: Any) -> str:
    return (request.get("model") if isinstance(request, dict) else None) or "gpt-fake"


def text_stream(text: str, request: Any, serial: int) -> SseStream:
    """The route's formatter: a string reply is an assistant message holding ``text``."""
    return _response_stream([{"type": "message", "text": text}], model=_model_of(request))


def function_call(
    name: str, arguments: dict[str, Any], *, text: str | None = None, call_id: str | None = None
):
    """A scripted answer calling function ``name`` with ``arguments`` (after ``text``, if any)."""
    items: list[dict[str, Any]] = [{"type": "message", "text": text}] if text else []
    items.append(
        {
            "type": "function_call",
            "name": name,
            "arguments": arguments,
            "call_id": call_id or f"call_fake_{next(_ids):04d}",
        }
    )

    def answer(request: Any) -> Reply:
        return Reply(body=_response_stream(items, model=_model_of(request)))

    return answer


def shell(command: str, **kwargs: Any):
    """A scripted answer running ``command`` through Codex's ``exec_command`` tool."""
    return function_call("exec_command", {"cmd": command}, **kwargs)


def is_agent_call(body: Any) -> bool:
    """Whether a request is the agent's own loop (it offers tools), not a side call."""
    return isinstance(body, dict) and bool(body.get("tools"))


class FakeResponsesServer(StreamingModelServer):
    def __init__(self) -> None:
        super().__init__()
        self.add_route(RESPONSES, text_stream)
        self.answer_always(
            "GET", "/v1/models", lambda body: {"object": "list", "data": [], "models": []}
        )

    def script(self, *replies: Any, route: str = RESPONSES) -> None:
        super().script(*replies, route=route)

    def _next_reply(self, request):  # type: ignore[no-untyped-def]
        if request.path == RESPONSES and not is_agent_call(request.body):
            self._record(request)
            return Reply(text=SIDE_CALL_TEXT), text_stream, 0
        return super()._next_reply(request)

    def agent_calls(self) -> list[Any]:
        """The bodies of the agent's own model calls, in order."""
        return [r.body for r in self.requests_to(RESPONSES) if is_agent_call(r.body)]

    def unused(self) -> int:
        return self.unused_replies(RESPONSES)


@pytest.fixture(name="responses_server")
def responses_server_fixture() -> Iterator[FakeResponsesServer]:
    """A started FakeResponsesServer (import this function into a test module to use it)."""
    with FakeResponsesServer() as server:
        yield server
