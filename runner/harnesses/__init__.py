"""Harnesses by name. A new agent is one module and one line here."""

from __future__ import annotations

from proctor.definitions import Variant
from runner.harnesses.aider.harness import AiderHarness
from runner.harnesses.base import (
    CONVERSATION_RESUME,
    PLAN_MODE,
    SEEDED_CONVERSATION,
    Harness,
    HarnessError,
    TurnRequest,
    TurnResult,
)
from runner.harnesses.chat.harness import ChatHarness
from runner.harnesses.claude_code.harness import ClaudeCodeHarness
from runner.harnesses.codex.harness import CodexHarness
from runner.harnesses.command.harness import CommandHarness
from runner.harnesses.gemini.harness import GeminiHarness
from runner.harnesses.opencode.harness import OpenCodeHarness
from runner.harnesses.oracle.harness import OracleHarness

HARNESSES: dict[str, type[Harness]] = {
    "command": CommandHarness,
    "claude-code": ClaudeCodeHarness,
    "codex": CodexHarness,
    "gemini": GeminiHarness,
    "opencode": OpenCodeHarness,
    "aider": AiderHarness,
    "chat": ChatHarness,
    "oracle": OracleHarness,
}


def create_harness(variant: Variant) -> Harness:
    try:
        harness_class = HARNESSES[variant.harness]
    except KeyError:
        known = ", ".join(sorted(HARNESSES))
        raise HarnessError(
            f"variant {variant.name}: unknown harness {variant.harness!r} (known: {known})"
        ) from None
    return harness_class(variant)


__all__ = [
    "CONVERSATION_RESUME",
    "HARNESSES",
    "PLAN_MODE",
    "SEEDED_CONVERSATION",
    "Harness",
    "HarnessError",
    "TurnRequest",
    "TurnResult",
    "create_harness",
]
