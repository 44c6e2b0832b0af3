"""Grading a finished trial again with its case's current checks, from what it left: its kept
workspace, its transcript and its mocks' call logs. No agent, harness, prepare or mock runs.

A trial that timed out stays timed out (its checks never ran, and never will), one that
errored stays errored. What cannot be had from the record is said in one line and the trial ends ``errored`` (kept
apart from the agent's failures): a workspace that was not kept, a task case (its verifier runs
in the task's image), a command check of a trial that ran in a docker sandbox (its image is not
started again). ``ctx.prepared`` is None: what prepare returned is a secret, never stored.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from proctor.agent_events import AgentEvent
from proctor.definitions import Command
from proctor.mock import merged_mocks
from runner.core.mock_calls import MockLog
from runner.core.redaction import Redactor
from runner.core.reporting import RedactingRecorder, TrialOutcome, TrialRecorder
from runner.core.transcript import Transcript
from runner.grading.assertions import TrialMeasures
from runner.grading.checks import CheckContext
from runner.grading.grade import assertion_context, grade
from runner.sandboxes import Sandbox, SandboxError, create_sandbox
from runner.trial.execute import TrialPlan, trial_cost
from runner.workspace.kept import NotRestorable, restore_workspace

# Sandboxes a re-grade makes again for the checks: those of this machine, and e2b's (a fresh
# sandbox from the template the trial ran in). Any other (docker, a plug-in's) is replaced by
# a local one, where command checks are refused.
REMADE_SANDBOXES = ("local", "bwrap", "e2b")


@dataclass
class StoredTurn:
    prompt: str
    origin: dict[str, Any] = field(default_factory=dict)
    mode: str = ""
    events: list[AgentEvent] = field(default_factory=list)


@dataclass
class StoredTrial:
    """What a finished trial left, as a re-grade reads it."""

    trial_id: int
    batch_id: int
    turns: list[StoredTurn]
    conversation: dict[str, Any]  # its conversation.json ({} when missing)
    mock_calls: dict[str, MockLog]
    duration_ms: int
    approved_plan: str | None = None
    # How the original ended: a timed-out or errored trial is never graded (see below).
    status: str = "passed"
    error: str = ""
    # The original's own record of the conversation, copied to the new trial.
    fields: dict[str, Any] = field(default_factory=dict)


def regrade_problem(plan: TrialPlan) -> str | None:
    """Why the case's current checks cannot run from a stored trial of this plan, in one
    line; None when they can."""
    if plan.resolved.case.task is not None:
        return (
            "a task case's verifier runs in its task's image, which a re-grade does not start; "
            "rerun the trial instead"
        )
    if plan.variant.sandbox not in REMADE_SANDBOXES:
        commands = [c.name for c in plan.resolved.checks if isinstance(c.check, Command)]
        if commands:
            return (
                f"check {commands[0]} is a command, which needs the {plan.variant.sandbox} "
                "sandbox's image the trial ran in; a re-grade does not start it, so rerun the "
                "trial instead"
            )
    return None


def regrade_trial(plan: TrialPlan, stored: StoredTrial, recorder: TrialRecorder) -> TrialOutcome:
    """Replay the stored transcript into ``recorder``, put the workspace back and run the
    plan's checks on them; returns the outcome it reported. Never raises for a check's or the
    record's failure."""
    guarded = RedactingRecorder(recorder, Redactor())
    started = time.monotonic()
    guarded.trial_started()
    transcript = _replayed(stored, guarded, plan.max_events)
    guarded.log(f"re-graded from trial {stored.trial_id} of batch {stored.batch_id}: no agent ran")
    sandbox: Sandbox | None = None
    try:
        if stored.status == "timed_out":
            # As when it ran: a trial that ran out of time never passes or fails.
            outcome = TrialOutcome(status="timed_out", finish_reason="timed out", **stored.fields)
            return _finished(guarded, outcome, started)
        if stored.status == "errored":
            raise NotRestorable(f"not re-graded: the trial errored ({stored.error})")
        problem = regrade_problem(plan)
        if problem is not None:
            raise NotRestorable(problem)
        sandbox = create_sandbox(
            plan.variant
            if plan.variant.sandbox in REMADE_SANDBOXES
            else replace(plan.variant, sandbox="local")
        )
        if plan.workspace_store is None:
            raise NotRestorable("workspace not kept: this installation keeps no workspaces")
        restore_workspace(
            plan.workspace_store, stored.conversation.get("workspace"), sandbox.host_workspace
        )
        if plan.resolved.case.prepare is not None:
            guarded.log("ctx.prepared is None: what prepare returned is a secret, never stored")
        outcome = _graded(plan, stored, sandbox, transcript, guarded)
    except (NotRestorable, SandboxError) as exc:
        outcome = TrialOutcome(
            status="errored", finish_reason="not re-gradable", error=str(exc), **stored.fields
        )
    except Exception as exc:  # a bug of ours must still end the trial with a readable record
        outcome = TrialOutcome(
            status="errored",
            finish_reason="internal error",
            error=f"{type(exc).__name__}: {exc}",
            **stored.fields,
        )
    finally:
        if sandbox is not None:
            sandbox.destroy()
    return _finished(guarded, outcome, started)


def _finished(recorder: RedactingRecorder, outcome: TrialOutcome, started: float) -> TrialOutcome:
    outcome.duration_ms = int((time.monotonic() - started) * 1000)
    recorder.trial_finished(outcome)
    return outcome


def _replayed(stored: StoredTrial, recorder: RedactingRecorder, max_events: int | None):
    """The stored turns and events, recorded again for the new trial's page (Usage apart: the
    re-grade spent nothing) and read into the transcript the checks see."""
    transcript = Transcript(
        seeded=list(stored.conversation.get("initial_messages") or []), max_events=max_events
    )
    for index, turn in enumerate(stored.turns):
        recorder.turn_started(index, turn.prompt, origin=turn.origin, mode=turn.mode)
        kept = transcript.start_turn(turn.prompt, origin=turn.origin, mode=turn.mode)
        for event in turn.events:
            kept.add(event)
        shown = [e for e in turn.events if e.kind != "Usage"]
        if shown:
            recorder.many_events(index, shown)
    # The mocks' calls too, so the new trial's page shows what its checks read.
    sink = getattr(recorder.inner, "mock_call", None)
    if sink is not None:
        for log in stored.mock_calls.values():
            for call in log:
                sink(call.to_json())
    return transcript


def _graded(
    plan: TrialPlan,
    stored: StoredTrial,
    sandbox: Sandbox,
    transcript: Transcript,
    recorder: RedactingRecorder,
) -> TrialOutcome:
    case = plan.resolved.case
    # A mock the agent never called is still there to ask, with no calls.
    mocks = {
        m.name: MockLog(m.name, m.kind) for m in merged_mocks(plan.resolved.suite.mocks, case.mocks)
    }
    mocks.update(stored.mock_calls)
    ctx = CheckContext(
        sandbox=sandbox,
        transcript=transcript,
        prepared=None,
        mocks=mocks,
        **assertion_context(plan.resolved, plan.variant),
    )
    measures = TrialMeasures(
        agent_ms=stored.duration_ms,
        cost_usd=trial_cost(transcript, plan.variant),
        user_turns=len(transcript.turns),
    )
    verdict = grade(
        plan.resolved,
        ctx,
        recorder,
        measures=measures,
        judge_model=plan.judge_model,
        approved_plan=stored.approved_plan,
    )
    return TrialOutcome(
        status="passed" if verdict.passed else "failed",
        finish_reason="re-graded",
        score=verdict.score,
        threshold=verdict.threshold,
        **stored.fields,
    )
