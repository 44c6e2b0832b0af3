"""How many trials every Proctor process on this machine has started and ended, as the write
audit needs to know them (``runner.sandboxes.audit``): an agent's writes outside its workspace
may be another trial's, whichever Proctor process ran it (two `proctor worker`s, a
`proctor eval` beside `proctor serve`), not only this process's and its sibling workers'.

Each process that runs trials keeps two counters, started and ended, in a 16-byte file named
after it (``<identity>``: pid and start time) in one folder for the machine: ``/dev/shm``'s
``proctor-trials`` (memory, never a disk), else the temp folder's. Only the process writes its
file, so nothing is locked between processes; a reader reads the others' files. An agent's run
counts, for each other process, the trials it was running when the agent started and every
trial it started before the agent ended: the same rule as the sibling board
(``runner.sandboxes.sibling_trials``), which also carries the siblings' secrets.

A process removes its file as it exits; a file whose owner is gone (killed) is removed by the
next reader, and what a dead process counted after a watch began still counts.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import struct
import tempfile
import threading
from pathlib import Path

from runner.sandboxes.containment import containment, identity_alive

_COUNTS = struct.Struct("=qq")


def board_folder() -> Path:
    """The machine's folder of counters (made on first use, writable by every user)."""
    base = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else Path(tempfile.gettempdir())
    folder = base / "proctor-trials"
    if not folder.is_dir():
        with contextlib.suppress(OSError):
            folder.mkdir(mode=0o1777)
            os.chmod(folder, 0o1777)  # the umask took bits away; sticky, as /tmp
    return folder


class MachineTrials:
    """This process's counters on the machine's board, and the others' as read from it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._pid = 0
        self._identity = ""
        self._counts = [0, 0]

    def _own_file(self) -> int | None:
        """This process's file, made on its first trial (after a fork: the child's own)."""
        if self._fd is not None and self._pid == os.getpid():
            return self._fd
        self._pid, self._identity = os.getpid(), containment().identity
        self._counts = [0, 0]
        path = board_folder() / self._identity
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        except OSError:
            self._fd = None
            return None
        atexit.register(_remove, path, self._pid)
        return self._fd

    def _bump(self, field: int) -> None:
        with self._lock:
            fd = self._own_file()
            if fd is None:
                return
            self._counts[field] += 1
            with contextlib.suppress(OSError):
                os.pwrite(fd, _COUNTS.pack(*self._counts), 0)

    def trial_started(self) -> None:
        self._bump(0)

    def trial_ended(self) -> None:
        self._bump(1)

    def others(self) -> dict[str, tuple[int, int]]:
        """Every other live Proctor process's (started, ended); removes the files of dead
        ones."""
        counts: dict[str, tuple[int, int]] = {}
        folder = board_folder()
        own = containment().identity
        try:
            names = os.listdir(folder)
        except OSError:
            return counts
        for name in names:
            if name == own:
                continue
            read = _read(folder / name)
            if read is None:
                continue
            if not identity_alive(name):
                with contextlib.suppress(OSError):
                    os.unlink(folder / name)
                continue
            counts[name] = read
        return counts

    def begin_watch(self) -> dict[str, tuple[int, int]]:
        """What the other processes are doing as an agent starts (give it to ``seen_since``)."""
        return self.others()

    def seen_since(self, begun: dict[str, tuple[int, int]]) -> int:
        """How many trials of other processes ran at some moment since ``begin_watch``: those
        running then, and those started since (a process gone meanwhile included)."""
        folder = board_folder()
        # Read before ``others`` removes the files of processes that ended meanwhile.
        last = {name: _read(folder / name) for name in begun}
        now = self.others()
        for name in begun.keys() - now.keys():
            now[name] = last[name] or begun[name]
        seen = 0
        for name, (started, _) in now.items():
            was_started, was_ended = begun.get(name, (0, 0))
            seen += max(0, was_started - was_ended) + max(0, started - was_started)
        return seen


def _read(path: Path) -> tuple[int, int] | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.pread(fd, _COUNTS.size, 0)
    finally:
        os.close(fd)
    if len(data) != _COUNTS.size:
        return None
    started, ended = _COUNTS.unpack(data)
    return started, ended


def _remove(path: Path, pid: int) -> None:
    if os.getpid() == pid:  # not a forked child's exit: the file is its parent's
        with contextlib.suppress(OSError):
            path.unlink()


machine_trials = MachineTrials()
os.register_at_fork(after_in_child=lambda: setattr(machine_trials, "_lock", threading.Lock()))
