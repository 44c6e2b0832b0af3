"""Starting a run's program directly inside its cgroup, where the kernel and the build allow it.

A process that moves itself into a cgroup (the shell wrapper of ``containment``: ``echo $$ >
cgroup.procs; exec …``) makes the kernel wait for an RCU grace period, unless the cgroup2 mount
has ``favordynmods``: about a millisecond when the machine is idle and 5 to 30 ms when it is
busy, for every run, plus the shell itself. ``clone3`` with ``CLONE_INTO_CGROUP`` (Linux 5.7)
creates the child in the cgroup instead, with no wait and no shell. Python's subprocess cannot
ask for it, so a small C extension (``_clone_into_cgroup.c``, built by ``pip install`` where a
compiler is found) does the clone; ``CgroupPopen`` is a ``subprocess.Popen`` whose child starts
that way, so everything else about the process (pipes, wait, poll, kill) is the standard one.

Where the extension is missing (not built, not x86-64) or the kernel refuses (``containment``
probes once per process), runs keep the shell wrapper: the same containment, only slower.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from typing import Any

try:
    from runner.sandboxes import _clone_into_cgroup  # type: ignore[attr-defined]
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
        with CgroupPopen(
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


class CgroupPopen(subprocess.Popen[bytes]):
    """A ``Popen`` whose program starts inside the cgroup open as ``cgroup_fd``.

    It takes what ``run_process`` asks of Popen: argv (no shell), env, cwd, the three
    standard streams, ``start_new_session``; every other descriptor is closed in the child, as
    with Popen's default ``close_fds``. The other child options (``preexec_fn``, ``pass_fds``,
    user, group, umask, process group) are refused.
    """

    def __init__(self, argv: Sequence[str], *, cgroup_fd: int, **options: Any) -> None:
        self._cgroup_fd = cgroup_fd
        super().__init__(argv, **options)

    def _execute_child(  # type: ignore[override]
        self,
        args,
        executable,
        preexec_fn,
        close_fds,
        pass_fds,
        cwd,
        env,
        startupinfo,
        creationflags,
        shell,
        p2cread,
        p2cwrite,
        c2pread,
        c2pwrite,
        errread,
        errwrite,
        restore_signals,
        gid,
        gids,
        uid,
        umask,
        start_new_session,
        process_group,
    ) -> None:
        unsupported = (
            shell
            or preexec_fn is not None
            or pass_fds
            or not close_fds
            or not restore_signals
            or gid is not None
            or gids is not None
            or uid is not None
            or umask >= 0
            or process_group not in (-1, None)
        )
        try:
            if unsupported:
                raise ValueError("CgroupPopen takes argv, env, cwd, streams and a new session only")
            argv = [os.fsencode(arg) for arg in args]
            program = os.fsencode(executable) if executable is not None else argv[0]
            if os.path.dirname(program):
                candidates: tuple[bytes, ...] = (program,)
            else:  # searched on the child's PATH, as subprocess does
                candidates = tuple(
                    os.path.join(os.fsencode(folder), program) for folder in os.get_exec_path(env)
                )
            env_list = None
            if env is not None:
                env_list = []
                for key, value in env.items():
                    name = os.fsencode(key)
                    if b"=" in name:  # as subprocess refuses it
                        raise ValueError("illegal environment variable name")
                    env_list.append(name + b"=" + os.fsencode(value))
            self.pid = _clone_into_cgroup.spawn(  # type: ignore[union-attr]
                candidates,
                argv,
                env_list,
                None if cwd is None else os.fsencode(cwd),
                self._cgroup_fd,
                p2cread if p2cread != -1 else 0,
                c2pwrite if c2pwrite != -1 else 1,
                errwrite if errwrite != -1 else 2,
                bool(start_new_session),
            )
            self._child_created = True
        finally:
            # Popen's own: the child's ends of the pipes, and its /dev/null, closed here.
            self._close_pipe_fds(  # type: ignore[attr-defined]
                p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite
            )
