"""What every harness offers: set up once per sandbox, then run one turn at a time.

A harness turns an agent's own output into normalized events (proctor.agent_events.AgentEvent)
and reports the session id a follow-up turn resumes.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proctor.agent_events import AgentEvent

# The capabilities are the SDK's (profile(capabilities=...) names them), and the harnesses'
# from here.
from proctor.definitions import CONVERSATION_RESUME as CONVERSATION_RESUME
from proctor.definitions import PLAN_MODE as PLAN_MODE
from proctor.definitions import SEEDED_CONVERSATION as SEEDED_CONVERSATION
from proctor.definitions import Variant
from runner.sandboxes import Sandbox
from runner.sandboxes.base import lines_taker

EventSink = Callable[[AgentEvent], None]
# Called with each raw output line of the agent process: (stream, line). The recorder's sink
# (runner.core.reporting.RawOutput) also takes a read's lines at once, with ``lines``.
RawSink = Callable[[str, str], None]


class StreamReader:
    """The ``on_line`` a harness gives its sandbox for the agent's process: every line is
    recorded raw, and each stdout line becomes the events ``read_line`` makes of it (each
    knowing its line: ``AgentEvent.line``), which go to ``emit``.

    It takes the lines of one read at once (a ``ManyLinesSink``), up to MANY_LINES at a time:
    they are recorded raw in one call, and their events go to ``emit.many`` in one call when
    the sink has it (the session's does), so a fast stream is not paid for line by line.
    """

    MANY_LINES = 1_000

    def __init__(
        self, raw: RawSink, read_line: Callable[[str], Iterable[AgentEvent]], emit: EventSink
    ) -> None:
        self._record = lines_taker(raw)
        self._read_line = read_line
        self._emit = emit
        self._emit_many: Callable[[list[AgentEvent]], None] | None = getattr(emit, "many", None)

    def __call__(self, stream: str, line: str) -> None:
        self.lines(stream, [line])

    def lines(self, stream: str, lines: list[str]) -> None:
        for start in range(0, len(lines), self.MANY_LINES):
            self._take(stream, lines[start : start + self.MANY_LINES])

    def _take(self, stream: str, lines: list[str]) -> None:
        self._record(stream, lines)
        if stream != "stdout":
            return
        found: list[AgentEvent] = []
        read_line = self._read_line
        for line in lines:
            for event in read_line(line):
                event.line = line
                found.append(event)
        if self._emit_many is not None:
            if found:
                self._emit_many(found)
        else:
            for event in found:
                self._emit(event)


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
    # The case's recorded variables (evals_app.resolution.recorded_variables); the command
    # harness hands them to its process as PROCTOR_CASE_VARS.
    variables: Mapping[str, Any] = field(default_factory=dict)


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
    """One agent under one variant, for one trial. Only ``run_turn`` must be written; every
    other hook has a default that suits a harness without that feature."""

    name: str = ""
    capabilities: frozenset[str] = frozenset()
    # The variant options this harness reads; an option neither it nor the sandbox reads is
    # refused at load (runner.batches.variant_options).
    option_names: frozenset[str] = frozenset()
    # Whether the agent CLI sends its own OpenTelemetry to the trial's OTLP receiver: the
    # trial then starts one (``sandbox.mocks.otlp_url``) and folds what arrives into each turn
    # (runner.harnesses.agent_telemetry).
    exports_otlp: bool = False

    def __init__(self, variant: Variant) -> None:
        self.variant = variant

    # --- known before any sandbox exists (called on the class while a batch is planned) -------

    @classmethod
    def capabilities_for(cls, variant: Variant) -> frozenset[str]:
        """What this harness can do under ``variant``. Called while a batch is planned, to
        refuse conversation and plan-mode cases the harness cannot run."""
        return cls.capabilities

    @classmethod
    def option_problems(cls, variant: Variant) -> list[str]:
        """What is wrong with ``variant``'s options, one sentence each naming the variant;
        empty when it can run. Called while a batch is planned, before any trial, so a bad
        option is reported with the eval file instead of erroring every trial."""
        return []

    @classmethod
    def declares_plan_file(cls, variant: Variant) -> bool:
        """Whether the harness writes its plan to a file under ``variant``."""
        return False

    # --- one trial ----------------------------------------------------------------------------

    def setup(self, sandbox: Sandbox, log: RawSink) -> None:  # noqa: B027 (optional hook)
        """Install what the agent needs into the sandbox, once per trial."""

    def secrets(self) -> list[str]:
        """Values the trial must redact from everything it records (an endpoint's key the
        harness resolved itself). Called once per trial, right after ``setup``."""
        return []

    def seed(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Start the next conversation from earlier messages (``{"role", "content"}``), for a
        case whose simulated user has initial messages. Called before the first turn, only on
        harnesses with the SEEDED_CONVERSATION capability; the others refuse."""
        raise HarnessError(f"harness {self.name} cannot start from initial messages")

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
