"""Starting a run's program directly inside its cgroup, where the kernel and the build allow it.

A process that moves itself into a cgroup (the shell wrapper of ``containment``: ``echo $$ >
cgroup.procs; exec …``) makes the kernel wait for an RCU grace period, unless the cgroup2 mount
has ``favordynmods``: about a millisecond when the machine is idle and 5 to 30 ms when it is
busy, for every run, plus the shell itself. ``clone3`` with ``CLONE_INTO_CGROUP`` (Linux 5.7)
creates the child in the cgroup instead, with no wait and no shell. Python's subprocess cannot
ask for it, so a small C extension (``_clone_into_cgroup.c``, built by ``pip install`` where a
compiler is found) does the clone; ``ClonedProcess`` is what ``run_process`` needs of a
``subprocess.Popen`` around it (pipes, poll, wait), without the rest of Popen's set-up.

Where the extension is missing (not built, not x86-64) or the kernel refuses (``containment``
probes once per process), runs keep the shell wrapper: the same containment, only slower.
"""

from __future__ import annotations

import functools
import importlib
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

try:
    # The optional extension, by its full name: a submodule of this package, which needs
    # nothing of the package's __init__ (the sandbox kinds, which import this module).
    _clone_into_cgroup: Any = importlib.import_module("runner.sandboxes._clone_into_cgroup")
except ImportError:  # not built here: runs move into their cgroup through the shell wrapper
    _clone_into_cgroup = None


def built() -> bool:
    """Whether this installation can start programs inside a cgroup (the kernel may still
    refuse: see ``probe``)."""
    return getattr(_clone_into_cgroup, "BUILT", 0) == 1


def open_cgroup(folder: str) -> int:
    """A descriptor of the cgroup ``folder``, as clone3 wants it."""
    return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def probe(folder: str) -> bool:
    """Whether a program started into the cgroup ``folder`` runs there: clone3 and
    CLONE_INTO_CGROUP are known to the kernel and allowed on that folder."""
    if not built():
        return False
    try:
        cgroup = open_cgroup(folder)
    except OSError:
        return False
    try:
        with ClonedProcess(
            ["true"],
            cgroup_fd=cgroup,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ) as started:
            return started.wait(timeout=10) == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        os.close(cgroup)


class _Pipe:
    """The parent's end of a child's pipe: what ``run_process`` asks of Popen's file objects
    (``fileno`` and ``close``), without making one (a file object costs three system calls)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)


class ClonedProcess:
    """A program started inside the cgroup open as ``cgroup_fd``: what ``run_process`` asks of
    a ``subprocess.Popen`` (``pid``, ``returncode``, the three streams, ``poll``, ``wait``), and
    nothing more. Popen's own set-up (a file object per pipe, /dev/null opened per process, an
    exit stack, a warnings filter) cost as much as the clone itself, twice per trial.

    It takes what ``run_process`` gives Popen: argv (no shell), env, cwd, ``subprocess.PIPE``
    or ``DEVNULL`` for each stream, ``start_new_session``; every other descriptor is closed in
    the child, as with Popen's default ``close_fds``. One thread waits for it (the run's).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cgroup_fd: int,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: int = subprocess.DEVNULL,
        stdout: int = subprocess.PIPE,
        stderr: int = subprocess.PIPE,
        start_new_session: bool = False,
    ) -> None:
        self.args = list(argv)
        self.returncode: int | None = None
        self.stdin: IO[bytes] | None = None
        self.stdout: _Pipe | None = None
        self.stderr: _Pipe | None = None
        launch = _launch_arguments(self.args, env, cwd)  # what cannot start raises first
        our_ends: list[int] = []  # per stream, this process's end (-1: none), kept if it starts
        child_ends: list[int] = []  # the pipes' other ends, closed here once the child has them
        try:
            fds = []
            for number, wanted in enumerate((stdin, stdout, stderr)):
                if wanted == subprocess.PIPE:
                    read, write = os.pipe2(os.O_CLOEXEC)
                    ours, child = (write, read) if number == 0 else (read, write)
                    our_ends.append(ours)
                    child_ends.append(child)
                elif wanted == subprocess.DEVNULL:
                    child = _devnull()
                    our_ends.append(-1)
                else:
                    raise ValueError("ClonedProcess takes subprocess.PIPE or DEVNULL per stream")
                fds.append(child)
            self.pid: int = _clone_into_cgroup.spawn(  # type: ignore[union-attr]
                *launch, cgroup_fd, *fds, bool(start_new_session)
            )
        except BaseException:
            for fd in our_ends:
                if fd >= 0:
                    os.close(fd)
            raise
        finally:
            for fd in child_ends:
                os.close(fd)
        if our_ends[0] >= 0:
            self.stdin = open(our_ends[0], "wb")  # noqa: SIM115 (closed by whoever writes it)
        if our_ends[1] >= 0:
            self.stdout = _Pipe(our_ends[1])
        if our_ends[2] >= 0:
            self.stderr = _Pipe(our_ends[2])

    def poll(self) -> int | None:
        """The exit code once the program has exited (a signal's as minus its number)."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored): as Popen says
                self.returncode = 0
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit; ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        if timeout is None:
            while self.returncode is None:
                try:
                    _, status = os.waitpid(self.pid, 0)
                except ChildProcessError:
                    self.returncode = 0
                else:
                    self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode
        deadline = time.monotonic() + timeout
        pause = 0.0005
        while (code := self.poll()) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.05)
        return code

    def __enter__(self) -> ClonedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        self.wait()


@functools.cache
def _devnull() -> int:
    """/dev/null, opened once per process for every child's closed streams (the child gets
    its own copy; this one is never closed)."""
    return os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)


# How os.fsencode encodes: kept here so a variable is encoded in one call, not two and a join.
_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()


@functools.lru_cache(maxsize=256)
def _candidates(program: bytes, path: str | None) -> tuple[bytes, ...]:
    """Where ``program`` is looked for on ``path`` (the child's PATH; None: the default), in
    order, as os.get_exec_path and subprocess do. Text only, no look at the disk, so a cached
    answer is always the same answer; runs that share a PATH (every check) share it."""
    folders = (os.defpath if path is None else path).split(os.pathsep)
    return tuple(_candidate(folder, program) for folder in folders)


@functools.lru_cache(maxsize=1024)
def _candidate(folder: str, program: bytes) -> bytes:
    """``program`` in ``folder``, kept per folder: an agent's PATH starts with its trial's own
    folder, so no two trials share a whole PATH, but they share every folder after it (a
    bytes os.path.join costs a few microseconds, a dozen of them per agent)."""
    return os.path.join(os.fsencode(folder), program)


def _launch_arguments(
    argv: list[str], env: Mapping[str, str] | None, cwd: str | None
) -> tuple[tuple[bytes, ...], list[bytes], list[bytes] | None, bytes | None]:
    """The extension's first four arguments: the paths to try for the program (searched on the
    child's PATH, as subprocess does), argv, the environment and the folder, as bytes.
    ValueError for what subprocess refuses too."""
    encoded = [os.fsencode(arg) for arg in argv]
    program = encoded[0]
    if os.path.dirname(program):
        candidates: tuple[bytes, ...] = (program,)
    else:
        candidates = _candidates(program, (os.environ if env is None else env).get("PATH"))
    env_list = None
    if env is not None:
        env_list = []
        for key, value in env.items():
            if "=" in key:  # as subprocess refuses it
                raise ValueError("illegal environment variable name")
            env_list.append(f"{key}={value}".encode(_FS_ENCODING, _FS_ERRORS))
    return candidates, encoded, env_list, None if cwd is None else os.fsencode(cwd)
