"""The ``niced`` sandbox: a fresh folder per trial (a workspace and a home in it), every process
run at a lower CPU priority (``nice=``, 10 unless a variant says otherwise).

It shows the whole interface a sandbox kind implements; Proctor's own helper
``run_process`` does the hard part of running a step (output streamed line by line, the
deadline, and killing everything the step started).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from runner.sandboxes.base import LineSink, ProcessResult, Sandbox, SandboxError
from runner.sandboxes.processes import run_process

if TYPE_CHECKING:
    from proctor.definitions import Variant


class NicedSandbox(Sandbox):
    kind = "niced"
    # Options a variant may give this kind; any other is refused when the eval loads.
    option_names = frozenset({"nice"})
    # cpus=, memory= and pids= are refused at load, with this reason.
    limits_refused_because = "the niced sandbox only lowers CPU priority; use nice="
    # Processes run on this machine, so the trial's mocks are in reach and files Proctor keeps
    # on the host can be handed to them as they are.
    sees_host_files = True

    def __init__(self, niceness: int) -> None:
        self.niceness = niceness
        self.root = Path(tempfile.mkdtemp(prefix="proctor-niced-"))
        self.host_workspace = self.root / "workspace"
        self.host_home = self.root / "home"
        self.host_workspace.mkdir()
        self.host_home.mkdir()
        # Paths as processes see them: the same, as they run on this machine.
        self.workspace = str(self.host_workspace)
        self.home = str(self.host_home)

    @classmethod
    def for_variant(cls, variant: Variant) -> NicedSandbox:
        niceness = variant.options.get("nice", 10)
        if not isinstance(niceness, int) or not 0 <= niceness <= 19:
            # A SandboxError ends the trial errored with this one sentence.
            raise SandboxError(f"variant {variant.name}: nice= is a whole number from 0 to 19")
        return cls(niceness)

    def base_env(self) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": self.home,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        # The trial's mocks: their variables, and their command-line shims first on PATH.
        return self.mocks.apply_env(env) if self.mocks else env

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout_s: float | None = None,
        on_line: LineSink | None = None,
    ) -> ProcessResult:
        full_env = {**self.base_env(), **(env or {})}
        return run_process(
            ["nice", "-n", str(self.niceness), *argv],
            env=full_env,
            cwd=cwd or self.workspace,
            timeout_s=timeout_s,
            on_line=on_line,
        )

    def destroy(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
