"""The ``oracle`` harness: a task's reference solution run as the agent.

``variant("oracle", sandbox="docker")`` runs each task case's ``solution/solve.sh`` (a
Terminal-Bench task's ``solution.sh``; for each step of a multi-step task, the step's
``steps/<name>/solution/solve.sh``) in the task's container, from its workspace, with the
solution's ``[solution] env``, as the agent would work; the task's verifier then grades it
like any agent's work. A batch with the oracle shows which tasks are solvable and whose images build.
The solution is put into the container only for its run (at ``/solution``) and removed after.
"""

from __future__ import annotations

from proctor.agent_events import AgentEvent
from proctor.tasks import HARBOR
from runner.harnesses.base import (
    EventSink,
    Harness,
    HarnessError,
    RawSink,
    TurnRequest,
    TurnResult,
)
from runner.sandboxes import Sandbox
from runner.sandboxes.task_container import TaskSandbox

SOLUTION_FOLDER = "/solution"


class OracleHarness(Harness):
    name = "oracle"

    def run_turn(
        self,
        sandbox: Sandbox,
        request: TurnRequest,
        *,
        emit: EventSink,
        raw: RawSink,
        timeout_s: float,
    ) -> TurnResult:
        if not isinstance(sandbox, TaskSandbox):
            raise HarnessError("the oracle runs only task cases (read with tasks(path))")
        task = sandbox.task
        if task.steps:  # a multi-step task: turn i is step i, with its own solution
            step = task.steps[min(request.index, len(task.steps) - 1)]
            script = task.path / step.folder / "solution" / "solve.sh"
            if not script.is_file():
                raise HarnessError(
                    f"task {task.name} has no reference solution for step {step.name} "
                    f"({step.folder}/solution/solve.sh)"
                )
            sandbox.put_folder(script.parent, SOLUTION_FOLDER)
        elif task.solution_script is None:
            raise HarnessError(
                f"task {task.name} has no reference solution "
                f"({'solution/solve.sh' if task.format == HARBOR else 'solution.sh'})"
            )
        else:
            script = task.path / task.solution_script
            if task.format == HARBOR:
                sandbox.put_folder(script.parent, SOLUTION_FOLDER)
            else:
                sandbox.put_folder(None, SOLUTION_FOLDER, also={script.name: script})
        emit(AgentEvent("Started", {"session_id": "oracle", "model": None}))
        lines: list[str] = []

        def on_line(stream: str, line: str) -> None:
            raw(stream, line)
            lines.append(line)

        command = f"bash {SOLUTION_FOLDER}/{script.name}"
        try:
            result = sandbox.run(
                ["bash", f"{SOLUTION_FOLDER}/{script.name}"],
                env=dict(task.solution_env),
                cwd=sandbox.workspace,
                timeout_s=timeout_s,
                on_line=on_line,
            )
        finally:
            sandbox.run(["rm", "-rf", SOLUTION_FOLDER], user="0", timeout_s=60)
        output = "\n".join(lines[-200:])
        emit(
            AgentEvent(
                "Command",
                {
                    "command": command,
                    "exit_code": result.exit_code,
                    "output": output,
                    "origin": "agent",
                },
            )
        )
        reason = "timed out" if result.timed_out else f"exit {result.exit_code}"
        answer = f"ran the reference solution ({script.name}): {reason}"
        emit(AgentEvent("Message", {"role": "assistant", "text": answer, "usage": None}))
        emit(AgentEvent("Finished", {"reason": reason}))
        return TurnResult(
            session_id="oracle",
            finish_reason=reason,
            timed_out=result.timed_out,
            exit_code=result.exit_code,
            answer=answer,
            duration_ms=result.duration_ms,
        )
