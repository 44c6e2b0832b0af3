"""Running one trial, start to finish, without the database.

create sandbox -> materialize source -> harness setup -> cache + prepare -> conversation
-> checks -> outcome. Everything is reported through a TrialRecorder wrapped in redaction.
Infrastructure failures (sandbox, source, install, prepare) end the trial ``errored``, kept
apart from the agent's own failures.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals_app.resolution import ResolvedCase
from proctor.conversations import Responder
from proctor.definitions import Command, Variant
from proctor.judges import Judge
from runner.checks import CheckContext, CheckResult, run_command_check, run_validator
from runner.conversation import drive_conversation
from runner.harnesses import HarnessError, create_harness
from runner.harnesses.profile_env import worker_secrets
from runner.judging import judge_config, run_judge
from runner.llm import resolve_config
from runner.preparing import PrepareError, run_prepare
from runner.recording import RedactingRecorder, TrialOutcome, TrialRecorder
from runner.redaction import Redactor, secret_values
from runner.sandboxes import Sandbox, SandboxError, create_sandbox
from runner.sandboxes.audit import audit_writes
from runner.session import AgentSession
from runner.sources import SourceError, materialize
from runner.workspace_diff import WorkspaceSnapshot


@dataclass
class TrialPlan:
    resolved: ResolvedCase
    variant: Variant
    index: int
    cache_root: Path
    git_host: str
    # Proctor's own folders (database, artifacts, caches): never an agent's outside write.
    own_folders: tuple[str, ...] = ()
    # Model overrides from the command line (--responder-model, --judge-model).
    responder_model: str | None = None
    judge_model: str | None = None


def responder_config(plan: TrialPlan, user: object):
    """The model endpoint the responder consults, when the case has one."""
    if not isinstance(user, Responder):
        return None
    return resolve_config(model_override=plan.responder_model or user.model)


def _run_judge(judge: Judge, ctx: CheckContext, plan: TrialPlan, index: int, recorder: RedactingRecorder,
               approved_plan: str | None) -> CheckResult:
    """A model judge grades outside the sandbox; its prompt and answer are kept."""
    config = judge_config(judge, cli_model=plan.judge_model)
    result, record = run_judge(judge, ctx, config=config, index=index, plan=approved_plan)
    recorder.consultation(record)
    return result


class InfrastructureError(Exception):
    """Something other than the agent broke; the message is the one sentence to show."""


def execute_trial(plan: TrialPlan, recorder: TrialRecorder) -> TrialOutcome:
    """Run the trial and report it; returns the outcome it reported. Never raises for a
    failure of the agent, the eval's code or the infrastructure."""
    guarded = RedactingRecorder(recorder, Redactor())
    started = time.monotonic()
    guarded.trial_started()
    sandbox: Sandbox | None = None
    try:
        sandbox = create_sandbox(plan.variant)
        outcome = _run_in(sandbox, plan, guarded)
    except (InfrastructureError, SandboxError, SourceError, HarnessError, PrepareError) as exc:
        outcome = TrialOutcome(status="errored", finish_reason="infrastructure", error=str(exc))
    except Exception as exc:  # a bug of ours must still end the trial with a readable record
        outcome = TrialOutcome(status="errored", finish_reason="internal error", error=f"{type(exc).__name__}: {exc}")
    finally:
        if sandbox is not None:
            sandbox.destroy()
    outcome.duration_ms = int((time.monotonic() - started) * 1000)
    guarded.trial_finished(outcome)
    return outcome


def _run_in(sandbox: Sandbox, plan: TrialPlan, recorder: RedactingRecorder) -> TrialOutcome:
    resolved = plan.resolved
    case = resolved.case
    definition = resolved.definition
    materialize(
        case.source if case.source is not None else resolved.suite.source,
        sandbox.host_workspace,
        cache_dir=plan.cache_root,
        git_host=plan.git_host,
    )
    harness = create_harness(plan.variant)
    # Keys a profile takes from the worker's environment are secrets from the start.
    if plan.variant.profile is not None:
        recorder.add_secrets(worker_secrets(plan.variant.profile.env))
    harness.setup(sandbox, lambda _stream, line: recorder.log(line))

    try:
        prepared = run_prepare(case.prepare, case.cache, sandbox, cache_root=plan.cache_root)
    except PrepareError as exc:
        for line in exc.log_lines:
            recorder.log(line)
        raise
    # From here on, what prepare returned is a secret: redact it from everything reported.
    recorder.add_secrets(secret_values(prepared.value))
    for line in prepared.log_lines:
        recorder.log(line)
    if prepared.log_lines:
        recorder.artifact("prepare.log", "\n".join(prepared.log_lines) + "\n")

    snapshot = WorkspaceSnapshot.take(sandbox.host_workspace, exclude=[case.cache.path] if case.cache else [])
    session = AgentSession(
        harness=harness,
        sandbox=sandbox,
        recorder=recorder,
        model=plan.variant.model,
        system_prompt=definition["system_prompt"],
        timeout_ms=definition["limits"]["timeout_ms"],
    )
    agent_started = time.time()
    conversation = drive_conversation(
        session,
        opening_prompt=definition["prompt"],
        user=case.user,
        max_turns=case.max_turns,
        plan_mode=case.plan_mode,
        plan_file=harness.plan_file(sandbox),
        responder_config=responder_config(plan, case.user),
    )
    transcript = session.transcript
    outside = audit_writes(sandbox, agent_started, ignore=[*plan.own_folders, str(plan.cache_root)])
    if outside:
        recorder.artifact("outside-writes.json", json.dumps(outside, indent=2))
        recorder.log(f"the agent changed {len(outside)} file(s) outside its workspace and home: {', '.join(outside[:5])}")
    if conversation.plan is not None:
        recorder.artifact("outputs/plan.md", conversation.plan)
    if session.denials:
        recorder.artifact("permission-denials.json", json.dumps(session.denials, indent=2, ensure_ascii=False))

    recorder.artifact("workspace.diff", snapshot.diff(sandbox.host_workspace))
    snapshot.discard()
    recorder.artifact(
        "conversation.json",
        json.dumps(
            {
                "outcome": conversation.outcome,
                "stop_cause": conversation.stop_cause or None,
                "responder_outcome": {"cause": conversation.responder_cause} if conversation.responder_cause else None,
                "plan": conversation.plan_record(),
                "session_id": session.session_id,
                "turns": [turn.to_json() for turn in transcript.turns],
            },
            indent=2,
            ensure_ascii=False,
        ),
    )
    last = session.last_result
    usage = transcript.usage()
    common: dict[str, Any] = dict(
        answer=transcript.answer,
        session_id=session.session_id or "",
        conversation_outcome=conversation.outcome,
        stop_cause=conversation.stop_cause,
        responder_cause=conversation.responder_cause,
        plan_state=conversation.plan_state,
        plan_signal=conversation.plan_signal,
        outside_writes=outside,
        usage=usage,
    )
    if session.timed_out:
        # A trial that ran out of time never passes or fails: its checks are not run.
        return TrialOutcome(status="timed_out", finish_reason="timed out", **common)

    ctx = CheckContext(sandbox=sandbox, transcript=transcript, prepared=prepared.value)
    results: list[CheckResult] = []
    for index, check in enumerate(resolved.checks):
        if isinstance(check.check, Command):
            result = run_command_check(check.check, ctx)
        elif isinstance(check.check, Judge):
            result = _run_judge(check.check, ctx, plan, index, recorder, conversation.plan)
        else:
            result = run_validator(check.check, ctx, name=check.name, source_ref=check.source_ref)
        results.append(result)
        recorder.check(index, result)
    passed = bool(results) and all(r.passed for r in results)
    scores = [r.score for r in results if r.score is not None]
    return TrialOutcome(
        status="passed" if passed else "failed",
        finish_reason=last.finish_reason if last else "",
        score=sum(scores) / len(scores) if scores else None,
        **common,
    )
