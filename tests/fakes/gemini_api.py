"""A fake Gemini API on loopback, streaming, for running the real Gemini CLI.

    with FakeGeminiServer() as server:
        server.script(function_call("run_shell_command", {"command": "ls"}), "All done.")
        env: GOOGLE_GEMINI_BASE_URL=server.root_url, GEMINI_API_KEY=anything

The Gemini CLI speaks only the Gemini API: the agent's loop is
``POST /v1beta/models/<model>:streamGenerateContent?alt=sse``, answered with SSE chunks of
``candidates[].content.parts`` (``{text}`` or ``{functionCall}``) and ``usageMetadata``. A plain
string reply becomes one text part. Calls made on the side (``generateContent`` for the CLI's
own checks, ``countTokens``, a stream without the agent's tools) are answered outside the
script, so a test scripts only what the agent does.

Every scripted answer reports the same usage (:data:`USAGE_PER_CALL`; like the real API,
``promptTokenCount`` includes the cached tokens).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from fakes.openai_server import ReceivedRequest
from fakes.sse_server import Reply, SseStream, StreamingModelServer

MODEL = "gemini-2.5-pro"
USAGE_PER_CALL = {
    "promptTokenCount": 200,
    "cachedContentTokenCount": 50,
    "candidatesTokenCount": 40,
}
SIDE_CALL_TEXT = "ok"

_ids = itertools.count(1)


def _usage() -> dict[str, int]:
    usage = dict(USAGE_PER_CALL)
    usage["totalTokenCount"] = usage["promptTokenCount"] + usage["candidatesTokenCount"]
    return usage


def _chunks(parts: list[dict[str, Any]], *, model: str) -> SseStream:
    """One chunk per part, the last carrying the finish reason and the usage."""
    response_id = f"fake-gemini-{next(_ids):04d}"
    events: list[tuple[str | None, Any]] = []
    for index, part in enumerate(parts):
        chunk: dict[str, Any] = {
            "candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}],
            "modelVersion": model,
            "responseId": response_id,
        }
        if index == len(parts) - 1:
            chunk["candidates"][0]["finishReason"] = "STOP"
            chunk["usageMetadata"] = _usage()
        events.append((None, chunk))
    return SseStream(events)


def text_stream(text: str, request: Any, serial: int) -> SseStream:
    """The stream route's formatter: a string reply is one text part."""
    return _chunks([{"text": text}], model=MODEL)


def function_call(name: str, args: dict[str, Any], *, text: str | None = None):
    """A scripted answer calling tool ``name`` with ``args`` (after ``text``, if any)."""
    parts: list[dict[str, Any]] = [{"text": text}] if text else []
    parts.append({"functionCall": {"name": name, "args": args}})
    return Reply(body=_chunks(parts, model=MODEL))


def shell(command: str, **kwargs: Any) -> Reply:
    """A scripted answer running ``command`` through ``run_shell_command``."""
    return function_call(
        "run_shell_command", {"command": command, "description": "run it"}, **kwargs
    )


def is_agent_call(body: Any) -> bool:
    """Whether a request is the agent's own loop (it offers tools), not a side call."""
    return isinstance(body, dict) and bool(body.get("tools"))


def _side_answer(body: Any) -> dict[str, Any]:
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": SIDE_CALL_TEXT}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
    }


class FakeGeminiServer(StreamingModelServer):
    def __init__(self, model: str = MODEL) -> None:
        super().__init__()
        self.model = model
        self.stream_route = f"/v1beta/models/{model}:streamGenerateContent"
        self.add_route(self.stream_route, text_stream)
        self.answer_always("POST", f"/v1beta/models/{model}:generateContent", _side_answer)
        self.answer_always(
            "POST", f"/v1beta/models/{model}:countTokens", lambda body: {"totalTokens": 10}
        )

    @property
    def base_url(self) -> str:
        """What GOOGLE_GEMINI_BASE_URL is set to (no path: the client adds ``/v1beta``)."""
        return self.root_url

    def script(self, *replies: Any, route: str | None = None) -> None:
        super().script(*replies, route=route or self.stream_route)

    def _next_reply(self, request: ReceivedRequest):  # type: ignore[no-untyped-def]
        if request.path == self.stream_route and not is_agent_call(request.body):
            self._record(request)
            return Reply(body=text_stream(SIDE_CALL_TEXT, request.body, 0)), text_stream, 0
        return super()._next_reply(request)

    def agent_calls(self) -> list[Any]:
        """The bodies of the agent's own model calls, in order."""
        return [r.body for r in self.requests_to(self.stream_route) if is_agent_call(r.body)]

    def unused(self) -> int:
        return self.unused_replies(self.stream_route)


@pytest.fixture(name="gemini_server")
def gemini_server_fixture() -> Iterator[FakeGeminiServer]:
    """A started FakeGeminiServer (import this function into a test module to use it)."""
    with FakeGeminiServer() as server:
        yield server
