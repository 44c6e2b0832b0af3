"""What a consultation returns, and how it fails.

Both kinds of endpoint (HTTP and command) answer with a Completion or raise an LLMError whose
cause is one of the conversation seed's dispatch causes, so a stopped run names the real fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
