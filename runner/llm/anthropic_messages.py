"""Anthropic's Messages API as the other wire format an HTTP endpoint may speak.

Callers hold a conversation in OpenAI's shape (system, user, assistant with ``tool_calls``,
``tool`` results) and offer tools as OpenAI function definitions; this module translates at
the wire and nowhere else: ``POST {base_url}/v1/messages`` with ``x-api-key`` and
``anthropic-version``, the system messages as the top-level ``system``, tool calls as
``tool_use`` blocks and their results as ``tool_result`` blocks of a user message. The answer
comes back as a Completion whose ``message`` is again in OpenAI's shape, so the history a
caller keeps never depends on the endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from runner.llm.completion import DISPATCH_FAILED, Completion, LLMError, history_message
from runner.llm.endpoints import LLMConfig, scrub_key

MESSAGES_PATH = "/v1/messages"
API_VERSION = "2023-06-01"
# The Messages API requires max_tokens; this is what a caller that names none gets.
DEFAULT_MAX_TOKENS = 4096
# Anthropic has no JSON mode: a JSON answer is asked for in words.
JSON_INSTRUCTION = "Answer with one JSON object and nothing else."


def messages_url(base_url: str) -> str:
    """The Messages URL under ``base_url``, given as Anthropic's SDK takes it (the root, as in
    ``ANTHROPIC_BASE_URL``) or ending in ``/v1``."""
    root = base_url.rstrip("/").removesuffix("/v1")
    return root + MESSAGES_PATH


def headers(config: LLMConfig) -> dict[str, str]:
    sent = {"anthropic-version": API_VERSION}
    if config.api_key:
        sent["x-api-key"] = config.api_key
    return sent


def request_body(
    config: LLMConfig,
    messages: list[dict[str, Any]],
    *,
    json_mode: bool,
    tools: Sequence[Mapping[str, Any]] | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
) -> dict[str, Any]:
    system = [str(m.get("content") or "") for m in messages if m.get("role") == "system"]
    if json_mode:
        system.append(JSON_INSTRUCTION)
    body: dict[str, Any] = {
        "max_tokens": max_tokens or DEFAULT_MAX_TOKENS,
        "messages": _conversation(messages),
        "temperature": 0 if temperature is None else temperature,
    }
    if config.model:
        body = {"model": config.model, **body}
    if system:
        body["system"] = "\n\n".join(part for part in system if part)
    if tools:
        body["tools"] = [_tool(spec) for spec in tools]
    return body


def _tool(spec: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI function definition as an Anthropic tool."""
    function = spec.get("function", spec)
    tool: dict[str, Any] = {
        "name": function["name"],
        "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
    }
    if function.get("description"):
        tool["description"] = function["description"]
    return tool


def _conversation(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The non-system messages as Anthropic's alternating user and assistant turns: a tool
    result is a block of a user turn, and neighbours of one role share a turn."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            continue
        blocks = _blocks(message)
        speaker = "assistant" if role == "assistant" else "user"
        if turns and turns[-1]["role"] == speaker:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": speaker, "content": blocks})
    return turns


def _blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    if message.get("role") == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": str(message.get("tool_call_id") or ""),
                "content": text,
            }
        ]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = {}
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id"),
                "name": function.get("name"),
                "input": arguments if isinstance(arguments, dict) else {},
            }
        )
    return blocks


def completion_from(raw: str, config: LLMConfig, *, duration_ms: int) -> Completion:
    """A Messages response as a Completion: its text blocks joined, its ``tool_use`` blocks as
    tool calls, its history message in OpenAI's shape."""
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        detail = raw.strip()[:200] or "an empty body"
        raise LLMError(
            DISPATCH_FAILED,
            scrub_key(
                f"the model endpoint answered with no Messages content: {detail!r}", config.api_key
            ),
        )
    blocks = [block for block in data["content"] if isinstance(block, dict)]
    text = "".join(
        block["text"]
        for block in blocks
        if block.get("type") == "text" and isinstance(block.get("text"), str)
    )
    tool_calls = [
        {
            "id": str(block.get("id") or f"toolu_{position}"),
            "name": block["name"],
            "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False),
        }
        for position, block in enumerate(blocks)
        if block.get("type") == "tool_use" and isinstance(block.get("name"), str)
    ]
    usage = data.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    return Completion(
        text=text,
        raw=raw,
        model=str(data.get("model") or config.model or ""),
        usage={
            name: int(usage[name])
            for name in ("input_tokens", "output_tokens")
            if isinstance(usage.get(name), int)
        },
        duration_ms=duration_ms,
        tool_calls=tool_calls,
        message=history_message(text, tool_calls),
    )
