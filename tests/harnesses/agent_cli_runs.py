"""Running a real agent CLI's harness directly, one trial at a time, without the database.

The CLIs come from ``tests/setup/agent-clis.sh`` (under ``.proctor/agent-clis``); a test that
needs one that is missing skips its ``agent-clis`` tier with the reason. A ``CliTrial`` is one
local sandbox, the harness set up in it and an AgentSession, so turns run exactly as in a trial.

With ``PROCTOR_RECORD_AGENT_FIXTURES=1`` a test's ``record(name)`` writes what the CLI printed
on stdout to ``fixtures/<name>.jsonl``: that is how the parser fixtures were captured.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from conftest import REPO, tier_unavailable

from proctor.agent_events import AgentEvent
from proctor.definitions import Variant
from runner.core.reporting import MemoryRecorder
from runner.core.transcript import TurnTranscript
from runner.harnesses import TurnResult, create_harness
from runner.sandboxes import Sandbox
from runner.sandboxes.local import LocalSandbox
from runner.trial.session import AgentSession

CLI_BIN = REPO / ".proctor" / "agent-clis" / "node_modules" / ".bin"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
RECORDING = os.environ.get("PROCTOR_RECORD_AGENT_FIXTURES") == "1"
TURN_TIMEOUT_MS = 120_000


def require_cli(name: str) -> str:
    """The PATH that finds CLI ``name``; skips the agent-clis tier when it is not installed."""
    if not (CLI_BIN / name).exists():
        tier_unavailable("agent-clis", f"{name} is not installed (run tests/setup/agent-clis.sh)")
    return f"{CLI_BIN}:/usr/local/bin:/usr/bin:/bin"


class TurnMarkingRecorder(MemoryRecorder):
    """A MemoryRecorder that remembers where each turn's raw output begins."""

    def __init__(self) -> None:
        super().__init__()
        self.raw_marks: list[int] = []

    def turn_started(self, index: int, prompt: str, *, origin: dict[str, Any], mode: str) -> None:
        self.raw_marks.append(len(self.raw))
        super().turn_started(index, prompt, origin=origin, mode=mode)


class CliTrial:
    def __init__(
        self,
        variant: Variant,
        *,
        workspace_files: dict[str, str] | None = None,
        system_prompt: str | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.sandbox = sandbox or LocalSandbox()
        for relative, text in (workspace_files or {}).items():
            self.sandbox.write_text(relative, text)
        self.harness = create_harness(variant)
        self.recorder = TurnMarkingRecorder()
        self.harness.setup(self.sandbox, lambda _stream, line: self.recorder.log(line))
        self.session = AgentSession(
            harness=self.harness,
            sandbox=self.sandbox,
            recorder=self.recorder,
            model=variant.model,
            system_prompt=system_prompt,
            timeout_ms=TURN_TIMEOUT_MS * 4,
        )

    @property
    def workspace(self) -> Path:
        return self.sandbox.host_workspace

    def send(self, prompt: str, *, mode: str = "") -> TurnResult:
        return self.session.send(prompt, mode=mode)

    def turn(self, index: int) -> TurnTranscript:
        return self.session.transcript.turns[index]

    def events(self, index: int) -> list[AgentEvent]:
        return [event for turn, event in self.recorder.events if turn == index]

    def kinds(self, index: int) -> list[str]:
        return [event.kind for event in self.events(index)]

    def stdout(self, index: int) -> list[str]:
        marks = self.recorder.raw_marks
        start = marks[index]
        end = marks[index + 1] if index + 1 < len(marks) else len(self.recorder.raw)
        return [line for stream, line in self.recorder.raw[start:end] if stream == "stdout"]

    def record(self, name: str, index: int = 0) -> None:
        if RECORDING:
            (FIXTURES / f"{name}.jsonl").write_text(
                "\n".join(self.stdout(index)) + "\n", encoding="utf-8"
            )

    def destroy(self) -> None:
        self.sandbox.destroy()


def commands(turn: TurnTranscript) -> list[tuple[str, Any]]:
    return [(c["command"], c["exit_code"]) for c in turn.commands]
