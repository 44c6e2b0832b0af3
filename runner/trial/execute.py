"""Running one trial, start to finish, without the database.

create sandbox -> materialize source -> harness setup -> cache + prepare -> conversation
-> checks -> outcome. Everything is reported through a TrialRecorder wrapped in redaction.
Infrastructure failures (sandbox, source, install, prepare) end the trial ``errored``, kept
apart from the agent's own failures.
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals_app.environment_secrets import credential_values
from evals_app.resolution import ResolvedCase, trial_prompts, trial_user
from proctor.conversations import Responder, SimulatedUser
from proctor.definitions import Source, Variant
from proctor.mock import merged_mocks
from proctor.tasks import Task
from runner.conversation.driver import ConversationResult, drive_conversation
from runner.conversation.planning_writes import changed_paths
from runner.core.json_text import indented_json
from runner.core.redaction import Redactor, secret_values
from runner.core.reporting import RedactingRecorder, TrialOutcome, TrialRecorder
from runner.grading.assertions import TrialMeasures
from runner.grading.checks import CheckContext
from runner.grading.grade import Grade, assertion_context, grade
from runner.grading.verifier import verify
from runner.harnesses import Harness, HarnessError, create_harness
from runner.harnesses.profile_env import worker_secrets
from runner.llm import resolve_config
from runner.mocks import mock_logs, start_mocks, stop_mocks
from runner.sandboxes import Sandbox, SandboxError, create_sandbox
from runner.sandboxes.audit import (
    SeenTrials,
    audit_writes,
    audit_writes_if_watched,
    concurrency_note,
    concurrent_trials,
    watch_before_agent,
)
from runner.sandboxes.task_container import TaskSandbox
from runner.trial.session import AgentSession
from runner.trial.task_artifacts import keep_task_artifacts
from runner.trial.task_steps import StepsOutcome, run_steps
from runner.workspace.diff import DEFAULT_IGNORE, WorkspaceSnapshot, diff_between
from runner.workspace.kept import WorkspaceStore, keep_workspace
from runner.workspace.prepare import Prepared, PrepareError, run_prepare
from runner.workspace.sources import SourceError, materialize


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
    # The workspace's source when it is not the case's own: a local repository's commit,
    # unpacked from its bundle on this worker.
    source: Source | None = None
    # The most events the trial keeps in memory (PROCTOR_MAX_TRIAL_EVENTS); None: all.
    max_events: int | None = None
    # Where the final workspace is kept for re-grading; None: it is not kept.
    workspace_store: WorkspaceStore | None = None


def responder_config(plan: TrialPlan, user: object):
    """The model endpoint the responder or the simulated user consults, when the case has one."""
    if isinstance(user, Responder):
        return resolve_config(model_override=plan.responder_model or user.model)
    if isinstance(user, SimulatedUser):
        return resolve_config(model_override=user.model)
    return None


def _record_outside_writes(
    outside: list[str], recorder: RedactingRecorder, *, others: SeenTrials | None = None
) -> list[str]:
    """Report the audit's paths, redacted like everything the recorder passes on. ``others``:
    the trials that ran beside the agent, whose writes the list may hold: their secrets are
    redacted too, and the record says so (an object with the paths, the count, the note and
    the pids of the other Proctor processes among them, instead of the bare list)."""
    count = others.count if others is not None else 0
    if others is not None and count and outside:
        theirs = Redactor(others.secrets())
        outside = [theirs.redact(path) for path in outside]
    outside = [recorder.redactor.redact(path) for path in outside]
    if outside:
        note = concurrency_note(count)
        record: object = outside
        if note:
            record = {"paths": outside, "concurrent_trials": count, "note": note}
            if others is not None and others.elsewhere:
                # Which other Proctor processes ran them (pid: trials), for the reader to look up.
                record["in_other_processes"] = {
                    str(pid): trials for pid, trials in sorted(others.elsewhere.items())
                }
        recorder.artifact("outside-writes.json", json.dumps(record, indent=2))
        shown = ", ".join(outside[:5])
        recorder.log(
            f"the agent changed {len(outside)} file(s) outside its workspace and home: {shown}"
            + (f" ({note})" if note else "")
        )
    return outside


def trial_cost(transcript, variant: Variant) -> float | None:
    """USD the agent's tokens cost at the variant's ``prices`` option ({"input_per_mtok",
    "output_per_mtok"}), else what the harness reported (Usage ``cost_usd``); None when unknown."""
    reported = transcript.cost_usd()
    prices = variant.options.get("prices")
    if isinstance(prices, dict):
        usage = transcript.usage()
        return (
            usage["input_tokens"] * float(prices.get("input_per_mtok", 0))
            + usage["output_tokens"] * float(prices.get("output_per_mtok", 0))
        ) / 1_000_000
    return reported


_audit_pool: ThreadPoolExecutor | None = None
_audit_pool_pid = 0
_audit_pool_lock = threading.Lock()


def _auditors() -> ThreadPoolExecutor:
    """The process's threads for write audits, kept from trial to trial (starting a thread per
    trial cost more than a watched audit itself)."""
    global _audit_pool, _audit_pool_pid
    with _audit_pool_lock:
        if _audit_pool is None or _audit_pool_pid != os.getpid():  # a fork has no threads
            _audit_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="proctor-audit")
            _audit_pool_pid = os.getpid()
        return _audit_pool


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
        with concurrent_trials.running(lambda: guarded.redactor.secrets) as token:
            sandbox = create_sandbox(plan.variant, plan.resolved.case.task, guarded.log)
            if sandbox.remote_id is not None:
                guarded.remote_sandbox(sandbox.kind, sandbox.remote_id)
            outcome = _run_in(sandbox, plan, guarded, token)
    except (InfrastructureError, SandboxError, SourceError, HarnessError, PrepareError) as exc:
        outcome = TrialOutcome(status="errored", finish_reason="infrastructure", error=str(exc))
    except Exception as exc:  # a bug of ours must still end the trial with a readable record
        outcome = TrialOutcome(
            status="errored", finish_reason="internal error", error=f"{type(exc).__name__}: {exc}"
        )
    finally:
        if sandbox is not None:
            stop_mocks(sandbox, guarded)  # their calls recorded as mocks/<name>.jsonl
            sandbox.destroy()
    outcome.duration_ms = int((time.monotonic() - started) * 1000)
    guarded.trial_finished(outcome)
    return outcome


def _run_in(
    sandbox: Sandbox, plan: TrialPlan, recorder: RedactingRecorder, token: int
) -> TrialOutcome:
    """The trial's steps in order, once its sandbox exists; ``token`` is the trial's entry on
    the board of concurrently running trials."""
    _materialize_source(sandbox, plan)
    # The case's mocks, outside the workspace, up before anything of the agent runs, with
    # the receiver of the agent's own telemetry when its CLI sends some and the sandbox can
    # reach the worker (a remote one cannot: its agent's telemetry is not collected).
    case = plan.resolved.case
    harness = create_harness(plan.variant)
    start_mocks(
        merged_mocks(plan.resolved.suite.mocks, case.mocks),
        sandbox,
        recorder=recorder,
        otlp_receiver=harness.exports_otlp and sandbox.reaches_host_mocks,
    )
    _set_up_harness(sandbox, plan, recorder, harness)
    prepared = _prepare_workspace(sandbox, plan, recorder)
    snapshot = WorkspaceSnapshot.take(
        sandbox.host_workspace,
        exclude=[case.cache.path] if case.cache else [],
        ignore=[*DEFAULT_IGNORE, *plan.resolved.suite.diff_ignore],
    )
    agent = _run_agent(sandbox, plan, recorder, token, harness, snapshot)
    _record_agent_artifacts(sandbox, recorder, agent, snapshot, plan.workspace_store)
    if case.task is not None and isinstance(sandbox, TaskSandbox):
        return _verify_task(sandbox, case.task, recorder, agent)
    # A trial that ran out of time never passes or fails: its checks are not run.
    verdict = None if agent.session.timed_out else _grade(sandbox, plan, recorder, agent, prepared)
    outside_writes = _record_outside_writes(agent.audit.result(), recorder, others=agent.others)
    common = _outcome_fields(agent, outside_writes)
    if verdict is None:
        return TrialOutcome(status="timed_out", finish_reason="timed out", **common)
    last = agent.session.last_result
    return TrialOutcome(
        status="passed" if verdict.passed else "failed",
        finish_reason=last.finish_reason if last else "",
        score=verdict.score,
        threshold=verdict.threshold,
        **common,
    )


def _materialize_source(sandbox: Sandbox, plan: TrialPlan) -> None:
    """Put the starting files in the workspace: the plan's own source (a local repository's
    commit) over the case's, over the suite's."""
    resolved = plan.resolved
    case_source = resolved.case.source
    materialize(
        plan.source or (case_source if case_source is not None else resolved.suite.source),
        sandbox.host_workspace,
        cache_dir=plan.cache_root,
        git_host=plan.git_host,
    )


def _set_up_harness(
    sandbox: Sandbox, plan: TrialPlan, recorder: RedactingRecorder, harness: Harness
) -> None:
    """The variant's harness installed in the sandbox, its secrets known to the recorder."""
    # Keys a profile takes from the worker's environment are secrets from the start.
    if plan.variant.profile is not None:
        recorder.add_secrets(worker_secrets(plan.variant.profile.env))
    harness.setup(sandbox, lambda _stream, line: recorder.log(line))
    recorder.add_secrets(harness.secrets())


def _prepare_workspace(sandbox: Sandbox, plan: TrialPlan, recorder: RedactingRecorder) -> Prepared:
    """Run the case's ``prepare`` (with its cache) and log what it printed; what it returned is
    a secret from here on. Raises PrepareError after logging its lines."""
    case = plan.resolved.case
    prepare_timeout_ms = plan.resolved.definition["limits"].get("prepare_timeout_ms")
    try:
        prepared = run_prepare(
            case.prepare,
            case.cache,
            sandbox,
            cache_root=plan.cache_root,
            limit_s=prepare_timeout_ms / 1000 if prepare_timeout_ms else None,
        )
    except PrepareError as exc:
        for line in exc.log_lines:
            recorder.log(line)
        raise
    recorder.add_secrets(secret_values(prepared.value))
    for line in prepared.log_lines:
        recorder.log(line)
    if prepared.log_lines:
        recorder.artifact("prepare.log", "\n".join(prepared.log_lines) + "\n")
    return prepared


@dataclass
class _AgentRun:
    """What the conversation with the agent left: the session (its transcript, clock and
    workspace), how the conversation ended, the trials that ran beside it, and the audit of
    its writes outside the workspace (possibly still running)."""

    session: AgentSession
    conversation: ConversationResult
    others: SeenTrials
    audit: Future[list[str]]
    # A multi-step task's steps, each verified as it ended.
    steps: StepsOutcome | None = None


def _run_agent(
    sandbox: Sandbox,
    plan: TrialPlan,
    recorder: RedactingRecorder,
    token: int,
    harness: Harness,
    snapshot: WorkspaceSnapshot,
) -> _AgentRun:
    """Hold the case's conversation with the agent, its writes outside the workspace watched
    from the first turn to the last."""
    resolved = plan.resolved
    case = resolved.case
    definition = resolved.definition
    # A variant carrying its own prompts runs them in place of the suite's.
    prompt, system_prompt = trial_prompts(definition, plan.variant.options)
    # A variable named as a credential (``api_key``) is a secret of the trial's record.
    recorder.add_secrets(credential_values(definition.get("variables") or {}))
    session = AgentSession(
        harness=harness,
        sandbox=sandbox,
        recorder=recorder,
        model=plan.variant.model,
        system_prompt=system_prompt,
        timeout_ms=definition["limits"]["timeout_ms"],
        workspace_snapshot=snapshot,
        max_events=plan.max_events,
        variables=definition.get("variables"),
    )
    audit_ignores = [*plan.own_folders, str(plan.cache_root)]
    watch_before_agent(sandbox, ignore=audit_ignores)
    agent_started = time.time()
    # Other trials of this process running meanwhile: the audit cannot tell their writes apart.
    steps: StepsOutcome | None = None
    with concurrent_trials.watching(token) as others_seen:
        if case.task is not None and case.task.steps and isinstance(sandbox, TaskSandbox):
            steps = run_steps(
                session, sandbox, case.task, artifact=recorder.artifact, log=recorder.log
            )
            conversation = steps.conversation
        else:
            conversation = drive_conversation(
                session,
                opening_prompt=prompt,
                user=trial_user(definition, plan.variant.options, case.user),
                max_turns=case.max_turns,
                plan_mode=case.plan_mode,
                plan_file=harness.plan_file(sandbox),
                responder_config=responder_config(plan, case.user),
                planning_changes=lambda: changed_paths(snapshot.diff(sandbox.host_workspace)),
            )
    others = others_seen()
    audit = _audit_outside_writes(sandbox, agent_started, ignore=audit_ignores)
    return _AgentRun(session, conversation, others, audit, steps)


def _audit_outside_writes(
    sandbox: Sandbox, agent_started: float, *, ignore: list[str]
) -> Future[list[str]]:
    """The paths outside the workspace and home changed between ``agent_started`` and now (the
    agent's end): only what changed before the agent finished counts. The process's watch
    usually answers at once; when only a walk of the system folders can (a subprocess), it
    runs on another thread while the checks do."""
    agent_ended = time.time()
    watched = audit_writes_if_watched(sandbox, agent_started, ignore=ignore, until=agent_ended)
    if watched is None:
        return _auditors().submit(
            audit_writes, sandbox, agent_started, ignore=ignore, until=agent_ended
        )
    audit: Future[list[str]] = Future()
    audit.set_result(watched)
    return audit


def _record_agent_artifacts(
    sandbox: Sandbox,
    recorder: RedactingRecorder,
    agent: _AgentRun,
    snapshot: WorkspaceSnapshot,
    store: WorkspaceStore | None,
) -> None:
    """The approved plan, the refused actions, the workspace diff, the final workspace (kept
    in ``store``, named in ``conversation.json``) and ``conversation.json``; the snapshot is
    discarded once the diff is written."""
    session, conversation = agent.session, agent.conversation
    if conversation.plan is not None:
        recorder.artifact("outputs/plan.md", conversation.plan)
    if session.denials:
        recorder.artifact(
            "permission-denials.json", json.dumps(session.denials, indent=2, ensure_ascii=False)
        )
    final = session.workspace_now
    if final is None:
        changed, final = snapshot.changes(sandbox.host_workspace)
        recorder.artifact("workspace.diff", diff_between(snapshot, final, changed))
    else:
        recorder.artifact("workspace.diff", diff_between(snapshot, final))
    # The bytes the diff just read, hashed here and written to the store off the path.
    kept = (
        keep_workspace(store, final.files(), sandbox.host_workspace) if store is not None else None
    )
    snapshot.discard()
    transcript = session.transcript
    recorder.artifact(
        "conversation.json",
        indented_json(
            {
                "outcome": conversation.outcome,
                "stop_cause": conversation.stop_cause or None,
                "responder_outcome": {"cause": conversation.responder_cause}
                if conversation.responder_cause
                else None,
                "plan": conversation.plan_record(),
                "session_id": session.session_id,
                "initial_messages": transcript.seeded or None,
                "turns": [turn.to_json() for turn in transcript.turns],
                # Past the trial's event cap, entries counted but not kept in memory.
                "events_not_kept": transcript.events_not_kept or None,
                # The final workspace in the store (runner.workspace.kept), or why not kept.
                "workspace": kept,
            }
        ),
    )


def _outcome_fields(agent: _AgentRun, outside_writes: list[str]) -> dict[str, Any]:
    """The outcome's fields that the conversation settles, whatever the verdict."""
    session, conversation = agent.session, agent.conversation
    return dict(
        answer=session.transcript.answer,
        session_id=session.session_id or "",
        conversation_outcome=conversation.outcome,
        stop_cause=conversation.stop_cause,
        responder_cause=conversation.responder_cause,
        plan_state=conversation.plan_state,
        plan_signal=conversation.plan_signal,
        usage=session.transcript.usage(),
        outside_writes=outside_writes,
    )


def _verify_task(
    sandbox: TaskSandbox, task: Task, recorder: RedactingRecorder, agent: _AgentRun
) -> TrialOutcome:
    """A task case's verdict: its verifier, after the agent finished or ran out of time (a
    multi-step task's ran after each step), and what it keeps of the container."""
    if agent.steps is None:
        verification = verify(sandbox, task, artifact=recorder.artifact)
        verifications, error = [verification], verification.error
        passed, score = verification.passed, verification.score
    else:
        verifications, error = agent.steps.verifications, agent.steps.error
        passed, score = agent.steps.passed, agent.steps.score
    for index, check in enumerate(c for v in verifications for c in v.checks):
        recorder.check(index, check)
    keep_task_artifacts(sandbox, task.artifacts, artifact=recorder.artifact, log=recorder.log)
    outside_writes = _record_outside_writes(agent.audit.result(), recorder, others=agent.others)
    common = _outcome_fields(agent, outside_writes)
    if agent.session.timed_out:
        return TrialOutcome(status="timed_out", finish_reason="timed out", **common)
    if error:
        return TrialOutcome(
            status="errored",
            finish_reason="verifier error" if error.startswith("verifier error") else "setup",
            error=error,
            score=score,
            **common,
        )
    last = agent.session.last_result
    return TrialOutcome(
        status="passed" if passed else "failed",
        finish_reason=last.finish_reason if last else "",
        score=score,
        threshold=task.reward_threshold,
        **common,
    )


def _grade(
    sandbox: Sandbox,
    plan: TrialPlan,
    recorder: RedactingRecorder,
    agent: _AgentRun,
    prepared: Prepared,
) -> Grade:
    """Run the case's checks on what the agent left and weigh them into a verdict."""
    session = agent.session
    transcript = session.transcript
    ctx = CheckContext(
        sandbox=sandbox,
        transcript=transcript,
        prepared=prepared.value,
        mocks=mock_logs(sandbox),
        trial_index=plan.index,
        **assertion_context(plan.resolved, plan.variant),
    )
    measures = TrialMeasures(
        agent_ms=session.clock.spent_ms,
        cost_usd=trial_cost(transcript, plan.variant),
        user_turns=len(transcript.turns),
    )
    return grade(
        plan.resolved,
        ctx,
        recorder,
        measures=measures,
        judge_model=plan.judge_model,
        approved_plan=agent.conversation.plan,
    )
