"""What every sandbox offers: a workspace and a home, processes run inside them, files.

A sandbox runs each process with stdin closed, streams its output line by line, and when the
process exits or its time is up kills everything it started (a cgroup per run where the machine
has cgroup v2, see ``runner.sandboxes.containment``), so an agent's children never outlive it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from proctor.definitions import Variant
    from runner.sandboxes.mock_access import MockAccess

# Called for each output line as it arrives: (stream name "stdout" | "stderr", line without \n).
LineSink = Callable[[str, str], None]
LinesTaker = Callable[[str, list[str]], None]


class ManyLinesSink(Protocol):
    """A line sink that also takes all the lines of one read at once, with ``lines``: what
    records an agent's stream is one, as a call per line was much of what a fast stream cost."""

    def __call__(self, stream: str, line: str) -> None: ...

    def lines(self, stream: str, lines: list[str]) -> None: ...


def lines_taker(sink: LineSink | ManyLinesSink) -> LinesTaker:
    """How ``sink`` takes many lines: its ``lines`` method when it has one, else a call each."""
    many = getattr(sink, "lines", None)
    if many is not None:
        return many  # type: ignore[no-any-return]

    def each(stream: str, lines: list[str]) -> None:
        for line in lines:
            sink(stream, line)

    return each


class SandboxError(Exception):
    """The sandbox itself broke (not the agent): the trial is errored, not failed."""


class PathEscapesWorkspace(ValueError):
    """A path given by an eval (validator, prepare) points outside the workspace."""


@dataclass(frozen=True)
class ProcessResult:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_ms: int

    @classmethod
    def not_started(cls, program: str, reason: str, duration_ms: int = 0) -> ProcessResult:
        """What every sandbox gives for a program that could not be started: exit 127 and one
        line, ``could not start <program>: <why>``."""
        return cls(
            exit_code=127,
            stdout="",
            stderr=f"could not start {program}: {reason}\n",
            timed_out=False,
            duration_ms=duration_ms,
        )

    @property
    def output(self) -> str:
        """stdout followed by stderr: what a person reading a command's result wants to see."""
        if self.stdout and self.stderr:
            return self.stdout.rstrip("\n") + "\n" + self.stderr
        return self.stdout or self.stderr


# Resource limits a variant may ask of its sandbox.
LIMIT_OPTIONS = ("cpus", "memory", "pids")


class Sandbox(abc.ABC):
    """One trial's isolated place to work. ``workspace`` and ``home`` are paths as processes
    inside the sandbox see them; ``host_workspace`` is where the host reads and writes them."""

    kind: str = ""
    # The variant options this kind reads; an option no sandbox or harness reads is refused at
    # load (runner.batches.variant_options), so a typo never runs on defaults.
    option_names: frozenset[str] = frozenset()
    # Why this kind refuses the resource limits (cpus=, memory=, pids=) it cannot apply, or ""
    # when it applies them all.
    limits_refused_because: str = ""
    # Whether its processes see the host's files at their host paths (nothing is mounted
    # elsewhere), so a file Proctor keeps outside the sandbox can be handed to them as it is.
    sees_host_files: bool = False
    # Whether its processes can reach the trial's mocks, which run on the worker (unix sockets
    # and loopback ports): a sandbox on another machine cannot, and a case with mocks is refused
    # at load for it (runner.batches.planning).
    reaches_host_mocks: bool = True
    # The provider's id of a sandbox that lives elsewhere (a remote machine), once it exists:
    # recorded with the trial so the reaper can kill it when the worker running it died.
    remote_id: str | None = None
    workspace: str
    home: str
    host_workspace: Path

    @classmethod
    @abc.abstractmethod
    def for_variant(cls, variant: Variant) -> Sandbox:
        """A sandbox of this kind for a trial of ``variant`` (its network allowance, and the
        image and limits its options name)."""

    @classmethod
    def variant_problems(cls, variant: Variant) -> list[str]:
        """What this kind cannot run ``variant`` with, one sentence each, found at load before
        any sandbox is made (a required option missing, say). Options nothing reads and
        limits it refuses are found for every kind by runner.batches.variant_options."""
        return []

    host_home: Path
    # The trial's mocks once started (runner.mocks): their variables and shims go into every
    # process's environment; a sandbox with the network off bridges their ports in.
    mocks: MockAccess | None = None

    @abc.abstractmethod
    def base_env(self) -> dict[str, str]:
        """The environment every process starts from (PATH, HOME, ...), before a step's own."""

    @abc.abstractmethod
    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout_s: float | None = None,
        on_line: LineSink | None = None,
    ) -> ProcessResult:
        """Run ``argv`` to completion (or until ``timeout_s``), stdin closed."""

    @abc.abstractmethod
    def destroy(self) -> None:
        """Remove everything the sandbox made. Safe to call twice."""

    @classmethod
    def kill_remote(cls, remote_id: str) -> None:
        """End the sandbox ``remote_id`` (a ``remote_id`` this kind gave) from any process: the
        reaper's call for a trial whose worker died. Kinds on the worker's own machine have
        nothing to do here (their folders and containers are swept by name)."""
        return None

    def resolve(self, path: str) -> Path:
        """The host path of ``path`` (relative to the workspace, or absolute inside it).

        Raises PathEscapesWorkspace for anything outside the workspace, symlinks included.
        """
        root = self.host_workspace.resolve()
        candidate = Path(path)
        if candidate.is_absolute():
            try:
                candidate = candidate.relative_to(self.workspace)
            except ValueError:
                raise PathEscapesWorkspace(f"{path} is outside the workspace") from None
        resolved = (root / candidate).resolve()
        if resolved != root and root not in resolved.parents:
            raise PathEscapesWorkspace(f"{path} is outside the workspace")
        return resolved

    def read_text(self, path: str) -> str:
        return self.resolve(path).read_text(encoding="utf-8", errors="replace")

    def write_text(self, path: str, text: str) -> None:
        target = self.resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")

    def exists(self, path: str) -> bool:
        try:
            return self.resolve(path).exists()
        except PathEscapesWorkspace:
            return False

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()
