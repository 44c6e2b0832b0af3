"""A multi-step task's steps, in order, in one container, as turns of one conversation.

Per step: its ``workdir/`` files go into the workspace and its ``setup.sh`` runs, its
healthcheck must pass, its instruction is the turn's message (the turn's origin names the
step), the agent has the step's own limit, and the step's verifier runs with the task's tests
merged under the step's own. A step whose reward is below its ``min_reward`` stops the task
("stopped after step scaffold: reward 0 < 1"); a verifier error or a failed setup or
healthcheck ends it too. Each step's checks carry its name ("scaffold: reward").
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from proctor.tasks import Step, Task
from runner.conversation.driver import ConversationResult
from runner.grading.verifier import Verification, verify
from runner.sandboxes.task_container import ROOT_USERS, TaskSandbox
from runner.trial.session import AgentClock, AgentSession
from runner.trial.task_artifacts import keep_task_artifacts

SETUP_FOLDER = "/proctor-step-setup"


@dataclass
class StepsOutcome:
    conversation: ConversationResult
    steps: int  # how many the task has
    verifications: list[Verification] = field(default_factory=list)
    # Why the task could not go on: a verifier error, a setup or healthcheck that failed.
    error: str = ""
    agent_ms: int = 0

    @property
    def passed(self) -> bool:
        return (
            not self.error
            and len(self.verifications) == self.steps
            and all(v.passed for v in self.verifications)
        )

    @property
    def score(self) -> float | None:
        scores = [v.score for v in self.verifications if v.score is not None]
        return min(scores) if scores else None


def run_steps(
    session: AgentSession,
    sandbox: TaskSandbox,
    task: Task,
    *,
    artifact: Callable[[str, str], None],
    log: Callable[[str], None],
) -> StepsOutcome:
    """Run every step (each verified before the next) until one stops the task."""
    outcome = StepsOutcome(
        conversation=ConversationResult(outcome="completed"), steps=len(task.steps)
    )
    for step in task.steps:
        problem = _prepare(sandbox, task, step, log)
        if problem:
            outcome.error = problem
            outcome.conversation = ConversationResult(outcome="stopped", stop_cause=problem)
            break
        session.clock = AgentClock(budget_ms=int(step.agent_timeout_s * 1000))
        session.send(step.instruction, origin={"runner": f"step {step.name}"})
        outcome.agent_ms += session.clock.spent_ms
        verification = verify(sandbox, task, artifact=artifact, step=step)
        outcome.verifications.append(verification)
        if step.artifacts:
            keep_task_artifacts(
                sandbox,
                step.artifacts,
                artifact=artifact,
                log=log,
                prefix=f"steps/{step.name}/",
                agent_logs=False,
            )
        if session.timed_out:
            outcome.conversation = ConversationResult(outcome="timed_out")
            break
        if verification.error:
            outcome.error = verification.error
            outcome.conversation = ConversationResult(
                outcome="stopped", stop_cause=f"stopped after step {step.name}: verifier error"
            )
            break
        score = verification.score
        if step.min_reward is not None and (score is None or score < step.min_reward):
            cause = f"stopped after step {step.name}: reward {score:g} < {step.min_reward:g}"
            log(cause)
            outcome.conversation = ConversationResult(outcome="stopped", stop_cause=cause)
            break
    return outcome


def _prepare(sandbox: TaskSandbox, task: Task, step: Step, log: Callable[[str], None]) -> str:
    """The step's files, setup and healthcheck; why the step cannot start, or ""."""
    folder = task.path / step.folder
    workdir = folder / "workdir"
    if workdir.is_dir():
        shutil.copytree(
            workdir,
            sandbox.host_workspace,
            dirs_exist_ok=True,
            ignore=lambda where, names: ["setup.sh"] if where == str(workdir) else [],
        )
        if task.agent_user and task.agent_user not in ROOT_USERS:
            sandbox._open_to_the_agent()
    setup = next((p for p in (workdir / "setup.sh", folder / "setup.sh") if p.is_file()), None)
    if setup is not None:
        sandbox.put_files({f"{SETUP_FOLDER.strip('/')}/setup.sh": setup}, "/")
        ran = sandbox.run(
            ["bash", f"{SETUP_FOLDER}/setup.sh"],
            cwd=sandbox.workspace,
            timeout_s=step.agent_timeout_s,
            on_line=lambda _stream, line: log(f"[setup {step.name}] {line}"),
        )
        sandbox.run(["rm", "-rf", SETUP_FOLDER], user="0", timeout_s=60)
        if ran.exit_code != 0:
            why = "ran past its limit" if ran.timed_out else f"exited {ran.exit_code}"
            return f"step {step.name}: setup.sh {why}"
    check = step.healthcheck
    if check is not None:
        for attempt in range(check.retries + 1):
            ran = sandbox.run(["sh", "-c", check.command], timeout_s=check.timeout_s)
            if ran.exit_code == 0:
                break
            if attempt < check.retries:
                time.sleep(check.interval_s)
        else:
            return (
                f"step {step.name}: its healthcheck `{check.command}` failed "
                f"{check.retries + 1} times"
            )
    return ""
