"""Consulting a model: for judges, the responder, simulated users and chat agents under test.

One call, ``complete(config, messages)``, goes to whichever endpoint the config names (an
OpenAI-compatible HTTP endpoint or a command) and returns a Completion or raises an LLMError
with its cause. What each caller keeps of one call is a ``runner.core.results.ConsultationRecord``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runner.llm.command_client import complete_command
from runner.llm.completion import DISPATCH_FAILED, DISPATCH_TIMED_OUT, Completion, LLMError
from runner.llm.endpoints import (
    API_ANTHROPIC,
    API_OPENAI,
    APIS,
    KIND_COMMAND,
    KIND_HTTP,
    KIND_UNCONFIGURED,
    LLMConfig,
    resolve_config,
    vendor_config,
)
from runner.llm.http_client import complete_http
from runner.llm.json_answers import parse_json_answer

__all__ = [
    "API_ANTHROPIC",
    "API_OPENAI",
    "APIS",
    "DISPATCH_FAILED",
    "DISPATCH_TIMED_OUT",
    "KIND_COMMAND",
    "KIND_HTTP",
    "KIND_UNCONFIGURED",
    "Completion",
    "LLMConfig",
    "LLMError",
    "complete",
    "parse_json_answer",
    "resolve_config",
    "vendor_config",
]

UNCONFIGURED_MESSAGE = "no model endpoint configured: set PROCTOR_LLM_BASE_URL (and PROCTOR_LLM_MODEL) or PROCTOR_LLM_COMMAND"
COMMAND_WITHOUT_TOOLS_MESSAGE = (
    "a model with tools needs an HTTP endpoint (PROCTOR_LLM_BASE_URL or the variant's base_url): "
    "a command endpoint answers in text only"
)


def complete(
    config: LLMConfig,
    messages: list[dict[str, Any]],
    *,
    json_mode: bool = False,
    tools: Sequence[Mapping[str, Any]] | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    response_format: Mapping[str, Any] | None = None,
) -> Completion:
    """Ask the configured model; blocks for the call (HTTP with retries, or a subprocess).

    ``json_mode`` asks an HTTP endpoint for a JSON object and tells a command (``"json": true``
    on stdin); either way, read the answer with ``parse_json_answer``. ``tools`` (OpenAI
    function definitions) lets the model answer with ``Completion.tool_calls`` instead of text;
    only an HTTP endpoint can. ``temperature`` defaults to 0 (repeatable verdicts);
    ``max_tokens`` and ``response_format`` (OpenAI's) go to an HTTP endpoint as given.
    """
    if config.kind == KIND_HTTP:
        return complete_http(
            config,
            messages,
            json_mode=json_mode,
            tools=tools,
            temperature=temperature,
            max_tokens=max_tokens,
            response_format=response_format,
        )
    if config.kind == KIND_COMMAND:
        if tools:
            raise LLMError(DISPATCH_FAILED, COMMAND_WITHOUT_TOOLS_MESSAGE)
        return complete_command(config, messages, json_mode=json_mode)
    raise LLMError(DISPATCH_FAILED, UNCONFIGURED_MESSAGE)
