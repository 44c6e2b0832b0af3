"""Anthropic's Messages API (not streamed) as a route of the fake model server.

    with FakeModelServer() as server:          # answers POST /v1/messages too
        server.script("Bonjour le monde", route=ANTHROPIC_MESSAGES)
        server.script(tool_use("get_weather", {"city": "Paris"}), "Sunny.", route=ANTHROPIC_MESSAGES)
        base URL: server.root_url (as ANTHROPIC_BASE_URL is given: the root, no /v1)

A plain string reply is an assistant message holding that text; :func:`tool_use` answers with
a ``tool_use`` block (and optional text before it). A request without ``max_tokens`` or with a
system message inside ``messages`` is refused with 400, as the real API refuses it, so a client
that speaks the format wrongly fails its test.
"""

from __future__ import annotations

import itertools
from typing import Any

ANTHROPIC_MESSAGES = "/v1/messages"
USAGE_PER_CALL = {"input_tokens": 13, "output_tokens": 7}

_ids = itertools.count(1)


def _message(blocks: list[dict[str, Any]], request: Any, *, stop_reason: str) -> dict[str, Any]:
    model = request.get("model") if isinstance(request, dict) else None
    return {
        "id": f"msg_fake_{next(_ids):04d}",
        "type": "message",
        "role": "assistant",
        "model": model or "fake-claude",
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": dict(USAGE_PER_CALL),
    }


def _refusal(request: Any) -> dict[str, Any] | None:
    """The 400 body the real API sends for the mistakes a translating client could make."""
    problem = None
    if not isinstance(request, dict) or not isinstance(request.get("max_tokens"), int):
        problem = "max_tokens: Field required"
    elif any(m.get("role") not in ("user", "assistant") for m in request.get("messages") or ()):
        problem = "messages: roles must be user or assistant (system is a top-level field)"
    if problem is None:
        return None
    return {"type": "error", "error": {"type": "invalid_request_error", "message": problem}}


def messages_body(text: str, request: Any, serial: int) -> dict[str, Any]:
    """A Messages response whose content is one text block."""
    return _refusal(request) or _message(
        [{"type": "text", "text": text}], request, stop_reason="end_turn"
    )


def tool_use(name: str, arguments: dict[str, Any], *, text: str | None = None) -> Any:
    """A scripted reply calling tool ``name`` with ``arguments``."""
    from fakes.openai_server import Reply

    def answer(request: Any) -> Reply:
        refused = _refusal(request)
        if refused is not None:
            return Reply(status=400, body=refused)
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_fake_{next(_ids):04d}",
                "name": name,
                "input": arguments,
            }
        )
        return Reply(body=_message(blocks, request, stop_reason="tool_use"))

    return answer
