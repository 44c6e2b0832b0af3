"""An agent session: sends the person's messages to the agent through its harness, one turn at
a time, recording everything and keeping the trial's agent-time budget.

The budget (``timeout_ms``) counts only the agent's time: time spent producing the person's
next message (a responder, a simulated user) is not charged to the agent.

After every turn the workspace is compared with its state before the turn, and what changed
that the agent did not report itself (a shell command's ``echo bye >> hello.txt``) is added to
the turn's file changes, as one FileChange event before the turn's Finished.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proctor.agent_events import AgentEvent
from runner.core.reporting import RawOutput, TrialRecorder
from runner.core.transcript import Transcript, TurnTranscript
from runner.harnesses import Harness, TurnRequest, TurnResult
from runner.harnesses.agent_telemetry import folded_events, read_turn
from runner.mocks import trial_telemetry
from runner.sandboxes import Sandbox
from runner.workspace.diff import WorkspaceSnapshot

DENIED_STATUSES = {"denied", "refused", "rejected", "blocked", "permission_denied"}


@dataclass
class AgentClock:
    budget_ms: int
    spent_ms: int = 0

    @property
    def remaining_s(self) -> float:
        return max(0.0, (self.budget_ms - self.spent_ms) / 1000)

    @property
    def exhausted(self) -> bool:
        return self.spent_ms >= self.budget_ms


class _TurnEvents:
    """The ``emit`` a harness is given for one turn: each event joins the turn's transcript and
    goes to the recorder; ``many`` takes the events of one read at once. The turn's first
    Finished is held back, to come after the changes found in the workspace (``release``)."""

    def __init__(self, turn: TurnTranscript, recorder: TrialRecorder) -> None:
        self.turn = turn
        self.recorder = recorder
        self._held_finish: AgentEvent | None = None

    def __call__(self, event: AgentEvent) -> None:
        if event.kind == "Finished" and self._held_finish is None:
            self._held_finish = event
            return
        self._record(event)

    def release(self) -> None:
        """The held Finished, once the turn's other events are in (the turn's last call)."""
        if self._held_finish is not None:
            self._record(self._held_finish)

    def _record(self, event: AgentEvent) -> None:
        self.turn.add(event)
        self.recorder.event(self.turn.index, event)

    def many(self, events: list[AgentEvent]) -> None:
        if any(event.kind == "Finished" for event in events):
            for event in events:
                self(event)
            return
        add = self.turn.add
        for event in events:
            add(event)
        self.recorder.many_events(self.turn.index, events)


class AgentSession:
    def __init__(
        self,
        *,
        harness: Harness,
        sandbox: Sandbox,
        recorder: TrialRecorder,
        model: str | None,
        system_prompt: str | None,
        timeout_ms: int,
        workspace_snapshot: WorkspaceSnapshot | None = None,
        max_events: int | None = None,
        variables: Mapping[str, Any] | None = None,
    ) -> None:
        self.harness = harness
        self.sandbox = sandbox
        self.recorder = recorder
        self.model = model
        self.system_prompt = system_prompt
        self.variables = dict(variables or {})
        self.clock = AgentClock(budget_ms=timeout_ms)
        # Capped like what the recorder stores: a million events keep memory bounded.
        self.transcript = Transcript(max_events=max_events)
        self.session_id: str | None = None
        self.timed_out = False
        self.last_result: TurnResult | None = None
        # Actions refused to the agent (by its harness or its mode), for permission-denials.json.
        self.denials: list[dict[str, Any]] = []
        # The workspace as the next turn starts (taken at the first turn when not given), and
        # whether it is also the workspace as it is now (no turn ran since, or broke off).
        self._workspace_before = workspace_snapshot
        self._workspace_current = False
        # How many of the agent's telemetry exports earlier turns have read.
        self._telemetry_read = 0

    @property
    def workspace_now(self) -> WorkspaceSnapshot | None:
        """The workspace as the last turn left it, read when that turn ended; None before the
        first turn or after one that broke off. Nothing of the agent's runs on once its turn
        ends (every sandbox ends a run's processes with it), so the trial's diff can compare
        with this instead of walking the workspace again."""
        return self._workspace_before if self._workspace_current else None

    def seed(self, messages: list[dict[str, str]]) -> None:
        """Start the agent's session from a recorded conversation (harnesses that can)."""
        self.harness.seed(messages)

    def send(
        self, prompt: str, *, origin: dict[str, Any] | None = None, mode: str = ""
    ) -> TurnResult:
        """Deliver one user message and run the agent until it answers (or time runs out)."""
        turn = self.transcript.start_turn(prompt, origin=origin, mode=mode)
        self.recorder.turn_started(turn.index, prompt, origin=turn.origin, mode=mode)
        if self._workspace_before is None:
            self._workspace_before = WorkspaceSnapshot.take(self.sandbox.host_workspace)
        self._workspace_current = False
        emit = _TurnEvents(turn, self.recorder)
        request = TurnRequest(
            prompt=prompt,
            index=turn.index,
            model=self.model,
            system_prompt=self.system_prompt
            if turn.index == 0 or self.session_id is None
            else None,
            session_id=self.session_id,
            mode=mode,
            variables=self.variables,
        )
        started = time.monotonic()
        result = self.harness.run_turn(
            self.sandbox,
            request,
            emit=emit,
            raw=RawOutput(self.recorder),
            timeout_s=self.clock.remaining_s,
        )
        self.clock.spent_ms += int((time.monotonic() - started) * 1000)
        self._fold_telemetry(turn, emit)
        unreported = self._unreported_changes(turn.file_changes)
        if unreported:
            emit(AgentEvent("FileChange", {"paths": unreported}))
        emit.release()
        self.timed_out = self.timed_out or result.timed_out
        self.session_id = result.session_id or self.session_id
        turn.finish_reason = turn.finish_reason or result.finish_reason
        self.recorder.turn_finished(turn.index, answer=turn.answer, usage=turn.usage)
        self._note_denials(turn.index, mode, turn.tool_calls, result.permission_denials)
        self.last_result = result
        return result

    def _fold_telemetry(self, turn: TurnTranscript, emit: _TurnEvents) -> None:
        """Add to the turn what the agent's own telemetry reported that its stream did not.
        The CLI flushed its exports as its process ended, so what arrived since the last turn
        is this turn's."""
        receiver = trial_telemetry(self.sandbox)
        if receiver is None:
            return
        exports = receiver.exports(self._telemetry_read)
        self._telemetry_read += len(exports)
        for event in folded_events(read_turn(exports), turn):
            emit(event)

    def _unreported_changes(self, reported: list[str]) -> list[str]:
        """The workspace paths (as the agent sees them) changed during the turn that the agent
        did not report; the next turn compares against the workspace as it is now."""
        assert self._workspace_before is not None
        changed, self._workspace_before = self._workspace_before.changes(
            self.sandbox.host_workspace
        )
        self._workspace_current = True
        root = self.sandbox.workspace.rstrip("/")
        known = {
            path.removeprefix(root + "/")
            if path.startswith(root + "/")
            else path.removeprefix("./")
            for path in reported
        }
        return [f"{root}/{rel}" for rel in changed if rel not in known]

    def _note_denials(
        self, index: int, mode: str, tool_calls: list[dict[str, Any]], refused: list[dict[str, Any]]
    ) -> None:
        """A refusal while planning is the mode working: attributed to plan mode, not a warning."""
        found = [
            {"tool": call.get("name"), "input": call.get("input"), "status": call.get("status")}
            for call in tool_calls
            if (call.get("status") or "").lower() in DENIED_STATUSES
        ]
        found.extend(refused)
        for denial in found:
            self.denials.append(
                {
                    **denial,
                    "turn": index,
                    "mode": mode or None,
                    "plan_mode_attributed": mode == "plan",
                }
            )
