"""What a consultation returns, and how it fails.

Both kinds of endpoint (HTTP and command) answer with a Completion or raise an LLMError whose
cause is one of the conversation seed's dispatch causes, so a stopped run names the real fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DISPATCH_FAILED = "dispatch_failed"
DISPATCH_TIMED_OUT = "dispatch_timed_out"


class LLMError(Exception):
    """A consultation produced no answer. ``cause`` is ``dispatch_failed`` or
    ``dispatch_timed_out``; the message is one sentence and never holds the key."""

    def __init__(self, cause: str, message: str) -> None:
        super().__init__(message)
        self.cause = cause
        self.message = message


@dataclass
class Completion:
    text: str
    raw: str
    model: str
    usage: dict[str, int] = field(default_factory=dict)
    duration_ms: int = 0
    # The functions the model asked to call, each ``{"id", "name", "arguments"}`` with the
    # arguments as the JSON text the model wrote (it may not parse: models get it wrong).
    tool_calls: list[dict[str, str]] = field(default_factory=list)
    # The assistant message as the conversation's history should carry it on the next call
    # (its tool calls included, so the tool results that follow have something to answer).
    message: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.message:
            self.message = {"role": "assistant", "content": self.text}


def history_message(text: str, tool_calls: list[dict[str, str]]) -> dict[str, Any]:
    """The assistant message to send back on the next call: only the fields every
    OpenAI-compatible server accepts (some refuse the extras a response carries, such as
    ``refusal`` or ``annotations``)."""
    if not tool_calls:
        return {"role": "assistant", "content": text}
    return {
        "role": "assistant",
        # OpenAI sends null content with tool calls; some servers refuse an empty string.
        "content": text or None,
        "tool_calls": [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            for call in tool_calls
        ],
    }
