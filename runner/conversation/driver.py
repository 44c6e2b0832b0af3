"""Driving the person's side of a trial.

A case is one shot (the opening prompt), an authored script of turns, or a responder that
answers the agent; any of them may begin in plan mode. This module decides what the person says
next and when the conversation ends; the AgentSession delivers it and the recorder keeps it.

How it can end: ``completed``; ``stopped`` with a cause (``responder_cannot_answer`` and the
responder's own cause, ``max_turns_reached``, ``plan_not_presented``, ``agent_did_not_ask``,
``agent_response_mismatch``); or ``timed_out``. A stopped conversation is a record, not a
failure: the checks still grade what the agent did.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from proctor.conversations import (
    DELIVER_WHEN_AGENT_ASKS,
    STOP_MARKER,
    Responder,
    SimulatedUser,
    Turns,
)
from runner.conversation.planning_writes import planning_write_records
from runner.conversation.responder import consult, reply_problem
from runner.conversation.simulated_user import next_message
from runner.core.reporting import TrialRecorder
from runner.core.transcript import Transcript
from runner.harnesses import TurnResult
from runner.llm import LLMConfig
from runner.sandboxes import Sandbox

PLAN_APPROVAL = "The plan is approved. Implement it now."


@dataclass
class ConversationResult:
    outcome: str  # completed | stopped | timed_out
    stop_cause: str = ""
    responder_cause: str = ""
    plan_state: str = ""  # "" | planning | approved
    plan_signal: str = ""  # plan_file | responder
    plan: str | None = None
    plan_round: int | None = None
    approval_round: int | None = None

    def plan_record(self) -> dict[str, Any] | None:
        if not self.plan_state:
            return None
        return {
            "state": self.plan_state,
            "signal": self.plan_signal or None,
            "presented_round": self.plan_round,
            "approval_round": self.approval_round,
        }


class PlanFileWatch:
    """Notices a plan file written during a planning round: ``path`` is a file, or a folder
    whose newest file is the plan (Claude Code writes ``~/.claude/plans/<name>.md``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: dict[Path, tuple[int, int]] = {}

    def _files(self) -> dict[Path, tuple[int, int]]:
        candidates = (
            [self.path]
            if not self.path.is_dir()
            else [p for p in self.path.rglob("*") if p.is_file()]
        )
        found = {}
        for file in candidates:
            try:
                stat = file.stat()
            except OSError:
                continue
            found[file] = (stat.st_mtime_ns, stat.st_size)
        return found

    def arm(self) -> None:
        self._seen = self._files()

    def written(self) -> str | None:
        """The plan written since ``arm()``, or None."""
        changed = [
            (stamp, file) for file, stamp in self._files().items() if self._seen.get(file) != stamp
        ]
        for _stamp, file in sorted(changed, reverse=True):
            text = file.read_text(encoding="utf-8", errors="replace")
            if text.strip():
                return text
        return None


class AgentSession(Protocol):
    """What the driver needs of the agent's session (``runner.trial.session.AgentSession``,
    one layer up): it sends the person's messages and reads what came back."""

    transcript: Transcript
    recorder: TrialRecorder
    sandbox: Sandbox
    timed_out: bool
    denials: list[dict[str, Any]]

    def seed(self, messages: list[dict[str, str]]) -> None: ...

    def send(
        self, prompt: str, *, origin: dict[str, Any] | None = None, mode: str = ""
    ) -> TurnResult: ...


class Conversation:
    def __init__(
        self,
        session: AgentSession,
        *,
        opening_prompt: str,
        user: Any,
        max_turns: int,
        plan_mode: bool,
        plan_file: Path | None,
        responder_config: LLMConfig | None,
        planning_changes: Callable[[], list[str]] | None = None,
    ) -> None:
        self.session = session
        self.opening_prompt = opening_prompt
        self.script = user if isinstance(user, Turns) else None
        self.responder = user if isinstance(user, Responder) else None
        self.simulated = user if isinstance(user, SimulatedUser) else None
        self.max_turns = max_turns
        self.plan_mode = plan_mode
        self.plan_watch = PlanFileWatch(plan_file) if plan_file is not None else None
        self.responder_config = responder_config
        self.planning_changes = planning_changes
        self.replies: list[str] = []  # what the responder delivered, in order
        # Follow-ups delivered: the messages after the opening prompt that the case's script or
        # its responder wrote. The runner's plan approval is not one (see docs/conversations.md).
        self.follow_ups = 0
        self.result = ConversationResult(
            outcome="completed", plan_state="planning" if plan_mode else ""
        )

    # --- the person speaks ---------------------------------------------------------------------

    def _send(
        self,
        prompt: str,
        *,
        origin: dict[str, Any] | None = None,
        mode: str = "",
        follow_up: bool = True,
    ) -> bool:
        """Deliver one message; False when the agent ran out of time."""
        if follow_up:
            self.follow_ups += 1
        self.session.send(prompt, origin=origin, mode=mode)
        return not self.session.timed_out

    def _budget_left(self) -> bool:
        return self.follow_ups < self.max_turns

    def _stop(self, cause: str, responder_cause: str = "") -> ConversationResult:
        self.result.outcome = "stopped"
        self.result.stop_cause = cause
        self.result.responder_cause = responder_cause
        return self.result

    def _timed_out(self) -> ConversationResult:
        self.result.outcome = "timed_out"
        return self.result

    @property
    def _last_answer(self) -> str:
        turns = self.session.transcript.turns
        return turns[-1].answer if turns else ""

    # --- the responder ---------------------------------------------------------------------------

    def _consult(self, *, planning: bool):
        """One responder consultation (recorded by the caller, once its cause is known)."""
        return consult(
            self.responder_config or LLMConfig(),
            opening_prompt=self.opening_prompt,
            earlier_replies=list(self.replies),
            last_message=self._last_answer,
            planning=planning,
            turn_index=len(self.session.transcript.turns) - 1,
        )

    def _record(self, answer, cause: str = "") -> None:
        if answer.record is not None:
            if cause:
                answer.record.cause = cause
            self.session.recorder.consultation(answer.record)

    def _responder_round(self, *, planning: bool, mode: str) -> str:
        """Ask the responder once and act on it: "delivered", "done", or "stopped"."""
        assert self.responder is not None
        out_of_budget = len(self.replies) >= self.responder.max_turns or not self._budget_left()
        answer = self._consult(planning=planning)
        if answer.verdict == "done":
            self._record(answer)
            return "done"
        if answer.verdict in ("cannot_answer", "failed"):
            self._record(answer)
            self._stop("responder_cannot_answer", answer.cause)
            return "stopped"
        if out_of_budget:
            # The agent is still asking at the bound: the responder would answer, but may not.
            self._record(answer)
            self._stop("max_turns_reached")
            return "stopped"
        problem = reply_problem(answer.reply, self.replies[-1] if self.replies else None)
        self._record(answer, problem or "")
        if problem:
            self._stop("responder_cannot_answer", problem)
            return "stopped"
        self.replies.append(answer.reply)
        origin = {
            "responder": {
                "model": answer.record.model if answer.record else "",
                "reason": answer.reason,
            }
        }
        if not self._send(answer.reply, origin=origin, mode=mode):
            self._timed_out()
            return "stopped"
        return "delivered"

    # --- the phases -------------------------------------------------------------------------------

    def run(self) -> ConversationResult:
        if self.simulated is not None:
            return self._simulated_conversation(self.simulated)
        mode = "plan" if self.plan_mode else ""
        if self.plan_watch is not None:
            self.plan_watch.arm()
        if not self._send(self.opening_prompt, mode=mode, follow_up=False):
            return self._timed_out()
        if self.plan_mode:
            left_planning = self._planning_phase()
            self._check_planning_writes()
            if not left_planning:
                return self.result
            approval = {"runner": "plan_approval"}
            if not self._send(PLAN_APPROVAL, origin=approval, mode="act", follow_up=False):
                return self._timed_out()
            self.result.approval_round = len(self.session.transcript.turns) - 1
        return self._act_phase("act" if self.plan_mode else "")

    def _planning_phase(self) -> bool:
        """Rounds in plan mode until a plan is presented; False when the conversation ended."""
        while True:
            plan = self.plan_watch.written() if self.plan_watch is not None else None
            if plan is not None:
                return self._plan_presented(plan, "plan_file")
            if self.responder is None:
                self._stop("plan_not_presented")
                return False
            if self.plan_watch is not None:
                self.plan_watch.arm()
            step = self._responder_round(planning=True, mode="plan")
            if step == "done":
                return self._plan_presented(self._last_answer, "responder")
            if step == "stopped":
                return False

    def _check_planning_writes(self) -> None:
        """The workspace at the end of the planning phase against its start: any change is a
        write the mode let through, kept beside the denials (see planning_writes)."""
        if self.planning_changes is None:
            return
        changed = self.planning_changes()
        if self.plan_watch is not None:
            # The harness's plan file may live in the workspace (OpenCode's .opencode/plans):
            # writing the plan there is what planning is for.
            plan_root = self.plan_watch.path.resolve()
            workspace = Path(self.session.sandbox.host_workspace).resolve()
            changed = [
                rel
                for rel in changed
                if not (workspace / rel == plan_root or plan_root in (workspace / rel).parents)
            ]
        if changed:
            last_planning_turn = len(self.session.transcript.turns) - 1
            self.session.denials.extend(planning_write_records(changed, turn=last_planning_turn))

    def _plan_presented(self, plan: str, signal: str) -> bool:
        self.result.plan = plan
        self.result.plan_signal = signal
        self.result.plan_round = len(self.session.transcript.turns) - 1
        self.result.plan_state = "approved"
        return True

    def _act_phase(self, mode: str) -> ConversationResult:
        if self.script is not None:
            return self._scripted(mode)
        if self.responder is not None:
            while True:
                step = self._responder_round(planning=False, mode=mode)
                if step == "done":
                    return self.result
                if step == "stopped":
                    return self.result
        return self.result

    def _simulated_conversation(self, user: SimulatedUser) -> ConversationResult:
        """The persona speaks first (its first message, else the case's prompt), then reacts to
        each answer until the agent says ###STOP###, the persona wraps up, or its turns run out.
        Seeded messages come before and count against nothing.

        With ``persona_opens`` (promptfoo's simulated user) the persona writes its first
        message too, and seeded messages ending with the person's are first answered by the
        agent: the last of them is delivered as an uncounted turn."""
        seeded_pairs = list(user.initial_messages)
        answer_seed = user.persona_opens and bool(seeded_pairs) and seeded_pairs[-1][0] == "user"
        # The person's last seeded message is delivered, so the agent answers it, not seeded.
        delivered_seed = seeded_pairs.pop()[1] if answer_seed else None
        history: list[tuple[str, str]] = [
            ("person" if role == "user" else "agent", content) for role, content in seeded_pairs
        ]
        if seeded_pairs:
            seeded = [{"role": role, "content": content} for role, content in seeded_pairs]
            self.session.seed(seeded)
            self.session.transcript.seeded = seeded
        # The persona's own bound governs (as promptfoo's maxTurns does); seeded messages and
        # nothing else are left out of it.
        limit = user.max_turns
        if delivered_seed is not None:
            if not self._send(delivered_seed, origin={"seeded": True}, follow_up=False):
                return self._timed_out()
            history += [("person", delivered_seed), ("agent", self._last_answer)]
        if user.persona_opens:
            sent = 0
        else:
            opening = user.first_message or self.opening_prompt
            sent = 1
            if not self._send(opening, follow_up=False):
                return self._timed_out()
            history += [("person", opening), ("agent", self._last_answer)]
        while True:
            if STOP_MARKER in self._last_answer:
                return self.result
            if sent >= limit:
                return self._stop("max_turns_reached")
            reply = next_message(
                user,
                self.responder_config or LLMConfig(),
                history,
                turn_index=max(len(self.session.transcript.turns) - 1, 0),
            )
            if reply.record is not None:
                self.session.recorder.consultation(reply.record)
            if reply.cause and not reply.stop:
                return self._stop("simulated_user_failed", reply.cause)
            if reply.stop and user.persona_opens:
                # promptfoo's simulated user: a message holding ###STOP### is never delivered.
                return self.result
            if reply.text:
                origin = {"simulated_user": {"model": reply.record.model if reply.record else ""}}
                sent += 1
                if not self._send(reply.text, origin=origin):
                    return self._timed_out()
                history += [("person", reply.text), ("agent", self._last_answer)]
            if reply.stop:
                return self.result

    def _scripted(self, mode: str) -> ConversationResult:
        assert self.script is not None
        for turn in self.script.turns:
            if not self._budget_left():
                return self._stop("max_turns_reached")
            answer = self._last_answer
            if turn.deliver_when == DELIVER_WHEN_AGENT_ASKS and "?" not in answer:
                return self._stop("agent_did_not_ask")
            if turn.agent_response_matches and not re.search(turn.agent_response_matches, answer):
                return self._stop("agent_response_mismatch")
            # A turn asking the case's prompt again was filled when the case was recorded.
            if not self._send(turn.prompt or "", mode=mode):
                return self._timed_out()
        return self.result


def drive_conversation(
    session: AgentSession,
    *,
    opening_prompt: str,
    user: Any = None,
    max_turns: int = 8,
    plan_mode: bool = False,
    plan_file: Path | None = None,
    responder_config: LLMConfig | None = None,
    planning_changes: Callable[[], list[str]] | None = None,
) -> ConversationResult:
    """``max_turns`` bounds the follow-ups (the messages after the opening prompt a script or a
    responder writes); ``planning_changes`` lists the workspace files changed since the
    conversation began, checked when a plan-mode case's planning phase ends."""
    return Conversation(
        session,
        opening_prompt=opening_prompt,
        user=user,
        max_turns=max_turns,
        plan_mode=plan_mode,
        plan_file=plan_file,
        responder_config=responder_config,
        planning_changes=planning_changes,
    ).run()
