"""What every harness offers: set up once per sandbox, then run one turn at a time.

A harness turns an agent's own output into normalized events (proctor.protocol.AgentEvent)
and reports the session id a follow-up turn resumes.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from proctor.definitions import Variant
from proctor.protocol import AgentEvent
from runner.sandboxes import Sandbox

CONVERSATION_RESUME = "conversation-resume"
PLAN_MODE = "plan-mode"
# The harness can start a conversation from earlier messages (``seed()``), so a case can test
# the agent mid-conversation.
SEEDED_CONVERSATION = "seeded-conversation"

EventSink = Callable[[AgentEvent], None]
# Called with each raw output line of the agent process: (stream, line).
RawSink = Callable[[str, str], None]


class HarnessError(Exception):
    """The harness could not run the agent (install failed, command missing): errored."""


@dataclass(frozen=True)
class TurnRequest:
    prompt: str
    index: int
    model: str | None
    system_prompt: str | None = None
    session_id: str | None = None  # set on follow-up turns: the session to resume
    mode: str = ""  # "plan" | "act" | "" (no plan mode)


@dataclass
class TurnResult:
    session_id: str | None
    finish_reason: str
    timed_out: bool
    exit_code: int | None
    answer: str = ""
    duration_ms: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    # Actions the agent's own harness refused (e.g. Claude Code's permission_denials).
    permission_denials: list[dict] = field(default_factory=list)


class Harness(abc.ABC):
    name: str = ""
    capabilities: frozenset[str] = frozenset()

    def __init__(self, variant: Variant) -> None:
        self.variant = variant

    @classmethod
    def capabilities_for(cls, variant: Variant) -> frozenset[str]:
        """What this harness can do under ``variant`` (known before any sandbox exists)."""
        return cls.capabilities

    @classmethod
    def declares_plan_file(cls, variant: Variant) -> bool:
        """Whether the harness writes its plan to a file under ``variant``."""
        return False

    def setup(self, sandbox: Sandbox, log: RawSink) -> None:  # noqa: B027 (optional hook)
        """Install what the agent needs into the sandbox, once per trial."""

    @abc.abstractmethod
    def run_turn(
        self,
        sandbox: Sandbox,
        request: TurnRequest,
        *,
        emit: EventSink,
        raw: RawSink,
        timeout_s: float,
    ) -> TurnResult:
        """Run one turn to completion, emitting events as they happen."""

    def plan_file(self, sandbox: Sandbox) -> Path | None:
        """Where this harness writes the plan it presents in plan mode (a file or a folder on
        the host), or None when it writes none and a responder must decide."""
        return None

    def missing_capabilities(self, *, conversation: bool, plan_mode: bool) -> list[str]:
        needed = []
        if conversation or plan_mode:
            needed.append(CONVERSATION_RESUME)
        if plan_mode:
            needed.append(PLAN_MODE)
        return [cap for cap in needed if cap not in self.capabilities]
