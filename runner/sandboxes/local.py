"""The ``local`` sandbox: a clean temporary folder per trial, processes in their own cgroup.

It isolates files and processes, not the system: use ``bwrap`` or ``docker`` for an agent that
must not touch the machine. Processes get a clean environment (no worker secrets leak in).
Everything a step starts is killed when it ends (``runner.sandboxes.containment``), and the
folder of a trial whose Proctor crashed is removed by the next one (``runner.sandboxes.leftovers``).
A trial's folder is empty when it starts; it may be one an earlier trial of this process used
and handed back (``runner.sandboxes.trial_folders``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from proctor.definitions import Variant
from runner.sandboxes.base import LineSink, ProcessResult, Sandbox
from runner.sandboxes.processes import run_process
from runner.sandboxes.trial_folders import hand_back, take

# Passed through from the worker so tools behave as they do for the person running Proctor.
INHERITED = ("PATH", "LANG", "LC_ALL", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR")


class LocalSandbox(Sandbox):
    kind = "local"
    sees_host_files = True
    limits_refused_because = (
        "it runs processes on the host with no resource limits; use sandbox='docker' for them"
    )

    def __init__(self) -> None:
        # What every process inherits from the worker, read once per trial (each run and the
        # harness ask for it); the mocks' variables go on top at each ask.
        self._inherited: dict[str, str] | None = None
        self.root = take()
        self.host_workspace = self.root / "workspace"
        self.host_home = self.root / "home"
        self.tmp = self.root / "tmp"
        self.workspace = str(self.host_workspace)
        self.home = str(self.host_home)

    @classmethod
    def for_variant(cls, variant: Variant) -> LocalSandbox:
        return cls()

    def base_env(self) -> dict[str, str]:
        if self._inherited is None:
            self._inherited = self._inherited_env()
        env = dict(self._inherited)
        return self.mocks.apply_env(env) if self.mocks else env

    def _inherited_env(self) -> dict[str, str]:
        env = {name: os.environ[name] for name in INHERITED if name in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        # The Python that runs Proctor comes first, so an agent written with the runner kit
        # (`python3 agent.py` importing proctor.runner) finds it without an install step.
        python_bin = os.path.dirname(sys.executable)
        if python_bin not in env["PATH"].split(os.pathsep):
            env["PATH"] = python_bin + os.pathsep + env["PATH"]
        env.setdefault("LANG", "C.UTF-8")
        env.update(
            HOME=self.home,
            TMPDIR=str(self.tmp),
            TERM="dumb",
            USER=os.environ.get("USER", "proctor"),
        )
        return env

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout_s: float | None = None,
        on_line: LineSink | None = None,
    ) -> ProcessResult:
        full_env = self.base_env()
        full_env.update(env or {})
        return run_process(
            argv, env=full_env, cwd=cwd or self.workspace, timeout_s=timeout_s, on_line=on_line
        )

    def destroy(self) -> None:
        # Gone under its name at once; emptied off the trial's path and used again
        # (runner.sandboxes.trial_folders).
        hand_back(self.root)
