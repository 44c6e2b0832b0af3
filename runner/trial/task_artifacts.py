"""What a task case keeps from its container besides the verifier's logs: the agent's logs
(``/logs/agent``) and the paths its ``artifacts`` list (a step's, after that step), recorded as
the trial's artifacts under ``artifacts/<path>`` and ``logs/agent/``."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from runner.sandboxes.base import SandboxError
from runner.sandboxes.task_container import AGENT_LOGS, TaskSandbox

# The largest file kept (larger ones are named in the log, not copied).
MAX_FILE_BYTES = 1 << 20


def keep_task_artifacts(
    sandbox: TaskSandbox,
    paths: Sequence[str],
    *,
    artifact: Callable[[str, str], None],
    log: Callable[[str], None],
    prefix: str = "",
    agent_logs: bool = True,
) -> None:
    """Copy ``paths`` (and ``/logs/agent``) out of the container into the trial's artifacts; a
    path the container lacks is said in the log, never an error."""
    wanted = [(AGENT_LOGS, f"{prefix}logs/agent")] if agent_logs else []
    wanted += [(path, f"{prefix}artifacts/{path.strip('/')}") for path in paths]
    for path, name in wanted:
        with tempfile.TemporaryDirectory(prefix="proctor-artifact-") as folder:
            try:
                kind = sandbox.copy_out(path, Path(folder))
            except SandboxError as exc:
                log(f"artifact {path}: {exc}")
                continue
            if not kind:
                if path != AGENT_LOGS:
                    log(f"artifact {path}: not in the container")
                continue
            files = sorted(p for p in Path(folder).rglob("*") if p.is_file())
            for file in files:
                if file.stat().st_size > MAX_FILE_BYTES:
                    log(f"artifact {path}: {file.name} is over {MAX_FILE_BYTES >> 20} MB, not kept")
                    continue
                inside = file.relative_to(folder).as_posix()
                where = name if kind == "file" else f"{name}/{inside}"
                artifact(where, file.read_bytes().decode("utf-8", "replace"))
