"""Finding and ending every process a step started: one cgroup per run, a watchdog per Proctor.

An agent's children do not stay in its process group: ``setsid sleep 600 &``, a double fork or
a Python daemon (``os.fork`` + ``os.setsid``) leave it, so killing the group misses them. What
``run_process`` uses instead, chosen once per Proctor process:

1. **A cgroup v2 per run**, where the machine has a writable cgroup2 mount (``/sys/fs/cgroup``,
   or ``/sys/fs/cgroup/unified`` on hybrid hosts; as root, or with a delegated subtree). Under
   Proctor's own cgroup sits ``proctor-<pid>-<start>/`` and in it one ``run-<n>/`` per run. The
   process starts through ``sh -c 'echo $$ > <run>/cgroup.procs; exec "$@"'``, so it is in the
   cgroup before it runs a line, and everything it starts stays there whatever it does with
   sessions and parents (only a process with the right to write another cgroup's
   ``cgroup.procs``, root, could leave). Where the kernel and the build allow it, the program is
   created inside the cgroup instead (``runner.sandboxes.cgroup_spawn``: clone3 with
   CLONE_INTO_CGROUP), which spares the shell and the kernel's wait that a move costs. The end
   writes 1 to ``cgroup.kill`` (Linux 5.14+), else SIGKILLs every pid in ``cgroup.procs`` until
   none is left, then removes the folder (a busy machine can take seconds to finish the killed
   processes: past a short wait a thread keeps at it, and the watchdog keeps the folder listed
   until it is gone). A cgroup its run left empty (``cgroup.events`` says
   ``populated 0``: nothing of the run lives on) is kept for the process's next run instead, as
   making and removing one costs more than the no-op trial's Python around it; Proctor sets no
   limit on it and reads no count from it, so a kept one starts its next run as a new one
   would.
2. **Else the process group**, as before: each run starts a new session and the group is
   killed. Children that call ``setsid`` escape it; nothing better is claimed.

A child subreaper (``PR_SET_CHILD_SUBREAPER``) was rejected: it is process-wide, a worker runs
several trials on threads at once, so every trial's orphans would reparent to the worker with
nothing saying which trial they belong to, and reaping them races subprocess's own ``waitpid``.
A PID namespace (``unshare --pid``) would hide host pids from the agent's own tools; the bwrap
sandbox has one anyway (``--unshare-pid --die-with-parent``, inside the run's cgroup), and docker
kills its container's processes itself after each step.

**A killed Proctor** (kill -9) cannot clean up, so a watchdog does: one small process per Proctor
process, in its own session and outside every run's cgroup, reading a pipe whose write end only
Proctor holds. Proctor tells it each tree as it starts and ends (and each docker sandbox's container); when
the pipe closes (Proctor exited or died, however) it kills every tree still open, removes every
container still listed (through the engine's unix socket), and removes Proctor's cgroup folder. And at start-up a sweep
kills and removes the cgroups of Proctor processes that are gone (the watchdog killed too).
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from runner.sandboxes.cgroup_spawn import ClonedProcess, open_cgroup
from runner.sandboxes.cgroup_spawn import probe as starts_inside_cgroups

log = logging.getLogger(__name__)

# Where programs cannot be created inside their cgroup: the run's process moves itself into it
# before it execs the program; "$0" is the folder.
CGROUP_WRAPPER = 'echo $$ > "$0/cgroup.procs" 2>/dev/null; exec "$@"'
# The most watchdog lines that wait for a prompt one (each line sent wakes the watchdog up).
LAZY_LINES = 64
# How long a run's end waits for the kernel to empty its cgroup before it leaves the removal to
# a background thread (a loaded machine can take seconds to finish killed processes).
EMPTY_WAIT_S = 2.0
# How long that thread keeps trying before it leaves the cgroup to the watchdog (which still
# lists it, and ends it when this process exits) and says so.
BUSY_CGROUP_PATIENCE_S = 600.0
# Empty run cgroups a process keeps for its next runs (each trial thread needs one at a time).
SPARE_CGROUPS = 8
# The folders a process names after itself in the temp folder (``proctor-<kind>-<identity>-``):
# its trial folders and workspace snapshots, swept by its watchdog and by later start-ups.
OWNED_KINDS = ("trial", "snapshot")

# The watchdog: lines "+<tree>" / "-<tree>" ("cg <folder>", "pg <pgid>", "docker <engine
# socket> <container id>" or "dir <folder>"); at EOF it kills the trees still open (a container
# is removed), then every run cgroup left under Proctor's (the spares kept for next runs
# included), then deletes the folders still listed and every folder named after its owner in
# the temp folder (``proctor-<kind>-<identity>-*``: the trial folders kept for next trials, a
# running trial's, a snapshot's), whether or not a line told it of them. Its arguments: the
# temp folder, the owner's identity, the owner's cgroup folder (when it has one). Run with
# ``python -I -S`` so it starts in milliseconds and imports nothing of Proctor's.
WATCHDOG = r"""
import os, signal, sys, time
temp, identity = sys.argv[1], sys.argv[2]
base = sys.argv[3] if sys.argv[3:] else None
open_trees = {}
for line in sys.stdin:
    op, tree = line[:1], line[1:].rstrip("\n")
    if op == "+":
        open_trees[tree] = None
    elif op == "-":
        open_trees.pop(tree, None)

def end_cgroup(where):
    try:
        with open(where + "/cgroup.kill", "w") as f:
            f.write("1")
    except OSError:
        for _ in range(20):
            try:
                pids = open(where + "/cgroup.procs").read().split()
            except OSError:
                return
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
    for _ in range(40):
        try:
            for inner, _, _ in os.walk(where, topdown=False):
                os.rmdir(inner)  # the cgroups a run as root made inside, then its own
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)

for tree in open_trees:
    kind, _, where = tree.partition(" ")
    if kind == "dir":
        continue  # removed below, once the processes that may write there are dead
    try:
        if kind == "pg":
            os.killpg(int(where), signal.SIGKILL)
            continue
        if kind == "docker":
            import socket
            engine, _, container = where.partition(" ")
            with socket.socket(socket.AF_UNIX) as conn:
                conn.settimeout(30)
                conn.connect(engine)
                conn.sendall(
                    f"DELETE /containers/{container}?force=1&v=1 HTTP/1.0\r\n\r\n".encode()
                )
                conn.recv(1024)
            continue
        end_cgroup(where)
    except (OSError, ValueError):
        pass
if base is not None:
    try:
        runs = [entry.path for entry in os.scandir(base) if entry.is_dir()]
    except OSError:
        runs = []
    for run in runs:
        end_cgroup(run)
    try:
        os.rmdir(base)
    except OSError:
        pass
import glob, shutil
folders = [where for kind, _, where in (t.partition(" ") for t in open_trees) if kind == "dir"]
for kind in OWNED_KINDS:
    folders += glob.glob(os.path.join(glob.escape(temp), f"proctor-{kind}-{identity}-*"))
for folder in folders:
    shutil.rmtree(folder, ignore_errors=True)
"""


def process_identity(pid: int) -> str | None:
    """``<pid>-<start time in clock ticks>``: names one process even after its pid is reused;
    None when no such process is running."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from its end.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return f"{pid}-{fields[19]}"


def identity_alive(identity: str) -> bool:
    """Whether the process ``identity`` (from process_identity) is still running."""
    pid, _, _ = identity.partition("-")
    return pid.isdigit() and process_identity(int(pid)) == identity


def _cgroup2_mount() -> Path | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            before, _, after = line.partition(" - ")
            if after.split(" ", 1)[0] == "cgroup2":
                return Path(before.split()[4])
    return None


def _own_cgroup(mount: Path) -> Path | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return mount / line[3:].strip().lstrip("/")
    return None


def _end_cgroup(folder: Path, wait_s: float | None = None) -> bool:
    """SIGKILL everything in ``folder`` (a cgroup, with the ones a run as root may have made
    inside it) and remove it once the kernel emptied it, waiting at most ``wait_s`` (default
    EMPTY_WAIT_S); False: it still holds something.
    An empty one (the usual end of a run: its program exited and was reaped, nothing of it
    lingers) is removed at once: the kernel refuses to remove a cgroup that holds a process,
    so a removal that works needs no look first."""
    try:
        os.rmdir(folder)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        pass  # busy: something of the run still lives
    try:
        (folder / "cgroup.kill").write_text("1")
    except OSError:
        for _ in range(20):
            try:
                pids = (folder / "cgroup.procs").read_text().split()
            except OSError:
                return not folder.exists()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
    deadline = time.monotonic() + (EMPTY_WAIT_S if wait_s is None else wait_s)
    while True:
        try:
            _remove_cgroup_tree(folder)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)


def _remove_cgroup_tree(folder: Path) -> None:
    """Remove ``folder`` and the cgroups inside it, innermost first (the kernel refuses to
    remove a cgroup that has one inside; cgroup.kill has killed their processes too)."""
    for inner, _, _ in os.walk(folder, topdown=False):
        if inner != str(folder):
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(inner)
    folder.rmdir()


def _keep_ending(folder: Path, then: Callable[[], None]) -> None:
    """Go on killing and removing ``folder`` until it is gone (then call ``then``), or until
    BUSY_CGROUP_PATIENCE_S passed."""
    give_up_at = time.monotonic() + BUSY_CGROUP_PATIENCE_S
    pause = 0.01
    while not _end_cgroup(folder, wait_s=0):
        time.sleep(pause)
        if time.monotonic() > give_up_at:
            log.warning(
                "cgroup %s still holds processes %d s after they were killed; the watchdog "
                "removes it when this process exits",
                folder,
                BUSY_CGROUP_PATIENCE_S,
            )
            return
        pause = min(pause * 2, 1.0)
    then()


def _signal_cgroup(folder: Path, sig: int) -> None:
    with contextlib.suppress(OSError):
        for pid in (folder / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                os.kill(int(pid), sig)


class _Containment:
    """This Proctor process's way of containing runs (cgroup or group) and its watchdog."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.identity = process_identity(self.pid) or str(self.pid)
        # Whether programs start inside their cgroup (clone3), or move in through a shell.
        self.starts_inside = False
        self.base: Path | None = self._cgroup_base()
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._watchdog_in: IO[bytes] | None = None
        self._lazy: list[bytes] = []  # lines waiting for the next prompt one
        self._spare_cgroups: list[Path] = []

    def _cgroup_base(self) -> Path | None:
        mount = _cgroup2_mount()
        own = _own_cgroup(mount) if mount else None
        if own is None or not os.access(own, os.W_OK):
            return None
        sweep_stale_cgroups(own)
        base = own / f"proctor-{self.identity}"
        probe = base / "probe"
        try:
            probe.mkdir(parents=True, exist_ok=True)
            if starts_inside_cgroups(str(probe)):
                self.starts_inside = True
                return base
            moved = subprocess.run(
                ["sh", "-c", 'echo $$ > "$0/cgroup.procs"', str(probe)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        finally:
            _end_cgroup(probe)
        return base if moved.returncode == 0 else None

    def tell_watchdog(self, line: str, *, prompt: bool = True) -> None:
        """Send ``line`` to the watchdog. ``prompt`` False: the line may wait for the next
        prompt one (at most LAZY_LINES of them wait), for news whose loss harms nothing when
        this process dies first: a removed cgroup or container named again is not found, a
        folder listed for removal has a name no one else uses. A process group's end is always
        prompt, as its id could be reused by someone else's group."""
        with self._lock:
            self._lazy.append(line.encode() + b"\n")
            if not prompt and len(self._lazy) < LAZY_LINES:
                return
            lines, self._lazy = b"".join(self._lazy), []
            if self._watchdog is None or self._watchdog.poll() is not None:
                self._start_watchdog()
            if self._watchdog_in is not None:
                with contextlib.suppress(OSError):
                    self._watchdog_in.write(lines)
                    self._watchdog_in.flush()

    def _start_watchdog(self) -> None:
        try:
            self._watchdog = subprocess.Popen(
                [
                    sys.executable,
                    "-I",
                    "-S",
                    "-c",
                    WATCHDOG.replace("OWNED_KINDS", repr(OWNED_KINDS)),
                    tempfile.gettempdir(),
                    self.identity,
                    *([str(self.base)] if self.base else []),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            self._watchdog_in = self._watchdog.stdin
        except OSError:
            self._watchdog, self._watchdog_in = None, None

    def new_tree(self) -> ProcessTree:
        if self.base is not None:
            with self._lock:
                spare = self._spare_cgroups.pop() if self._spare_cgroups else None
            if spare is not None:
                return ProcessTree(self, spare, known=True)
            folder = self.base / f"run-{next(self._numbers)}"
            try:
                folder.mkdir(parents=True)
                return ProcessTree(self, folder)
            except OSError:
                pass
        return ProcessTree(self, None)

    def keep_if_empty(self, cgroup: Path) -> bool:
        """Keep a run's cgroup for the next run when nothing lives in it any more (and fewer
        than SPARE_CGROUPS wait); False: the caller ends and removes it."""
        try:
            events = os.open(f"{cgroup}/cgroup.events", os.O_RDONLY | os.O_CLOEXEC)
            try:
                if b"populated 0" not in os.read(events, 4096):
                    return False
            finally:
                os.close(events)
        except OSError:
            return False
        with self._lock:
            if len(self._spare_cgroups) >= SPARE_CGROUPS:
                return False
            self._spare_cgroups.append(cgroup)
            return True

    def end_cgroup(self, cgroup: Path) -> None:
        """Kill and remove a run's cgroup, then tell the watchdog it is gone. One the kernel
        has not emptied within EMPTY_WAIT_S is left to a thread that keeps at it (the run need
        not wait longer: its processes are killed), and the watchdog keeps it listed until it
        is gone, so a cgroup is never forgotten while it still exists."""

        def forget() -> None:
            self.tell_watchdog(f"-cg {cgroup}", prompt=False)

        if _end_cgroup(cgroup):
            forget()
            return
        threading.Thread(
            target=_keep_ending,
            args=(cgroup, forget),
            name=f"proctor-end-{cgroup.name}",
            daemon=True,
        ).start()


_containment: _Containment | None = None
_containment_lock = threading.Lock()


def _forget_in_child() -> None:
    """A forked child (a validator, a prepare function) starts with its own containment, and
    with a fresh lock: another thread may have held this one at the moment of the fork, and
    nothing in the child would ever release it."""
    global _containment, _containment_lock
    _containment, _containment_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


def containment() -> _Containment:
    """The containment of this process, made (and stale cgroups swept) on first use."""
    global _containment
    with _containment_lock:
        if _containment is None or _containment.pid != os.getpid():
            _containment = _Containment()  # also after a fork: a new process, its own trees
        return _containment


def uses_cgroups() -> bool:
    """Whether runs here are contained by cgroups (True) or only by their process group."""
    return containment().base is not None


def sweep_stale_cgroups(own: Path) -> None:
    """Kill and remove the run cgroups of Proctor processes that are gone. Processes that start
    together (the workers `proctor eval` forks, two `proctor worker`s) sweep the same trees at
    once, so a tree or a run may vanish under this one's listing: gone is what it wanted."""
    for base in own.glob("proctor-*"):
        if identity_alive(base.name.removeprefix("proctor-")):
            continue
        try:
            runs = [run for run in base.iterdir() if run.is_dir()]
        except FileNotFoundError:
            continue
        for run in runs:
            _end_cgroup(run)
        with contextlib.suppress(OSError):
            base.rmdir()


def watch_container(engine_socket: str, container_id: str, *, done: bool = False) -> None:
    """Have the watchdog remove the container if this process dies before ``done``."""
    containment().tell_watchdog(
        f"{'-' if done else '+'}docker {engine_socket} {container_id}", prompt=not done
    )


class TrialScope:
    """The process trees started by one trial (on its thread), so that a trial this process
    must give up (its lease was taken over) can end all of them from another thread, and any
    it would start afterwards die at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._trees: set[ProcessTree] = set()
        self.ended = False

    def add(self, tree: ProcessTree) -> bool:
        """Count ``tree`` in; False when the scope ended (the caller kills it)."""
        with self._lock:
            if not self.ended:
                self._trees.add(tree)
            return not self.ended

    def discard(self, tree: ProcessTree) -> None:
        with self._lock:
            self._trees.discard(tree)

    def end(self) -> None:
        """SIGKILL every tree of the trial, now and for whatever it starts later."""
        with self._lock:
            self.ended = True
            trees = list(self._trees)
        for tree in trees:
            tree.kill()


_scope: contextvars.ContextVar[TrialScope | None] = contextvars.ContextVar(
    "proctor_trial_scope", default=None
)


@contextlib.contextmanager
def trial_scope() -> Iterator[TrialScope]:
    """Count the trees started in this block (this thread) as one trial's."""
    scope = TrialScope()
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)


class ProcessTree:
    """One run's processes: the program started by ``wrap(argv)`` and all it starts."""

    def __init__(
        self,
        owner: _Containment,
        cgroup: Path | None,
        *,
        dies_with_proctor: bool = False,
        known: bool = False,
    ) -> None:
        self.owner = owner
        self.cgroup = cgroup
        # A group that ends by itself when this process dies (bwrap's --die-with-parent) is
        # none of the watchdog's business.
        self.watched = cgroup is not None or not dies_with_proctor
        self.pgid: int | None = None
        self.scope = _scope.get()
        # Once ended, the cgroup may serve another run: signals and kills stop reaching it.
        self._ended = False
        self._end_lock = threading.Lock()
        if cgroup is not None and not known:  # a kept cgroup: the watchdog knows it already
            owner.tell_watchdog(f"+cg {cgroup}")

    @property
    def starts_through_shell(self) -> bool:
        """Whether the program is exec'd by the cgroup wrapper (whose exec errors Popen cannot
        see) rather than by Popen or clone3 itself."""
        return self.cgroup is not None and not self.owner.starts_inside

    def popen(self, argv: list[str], **options: Any) -> subprocess.Popen[bytes] | ClonedProcess:
        """Start ``argv`` as the tree's program (``options`` as for Popen), inside the tree's
        cgroup from its first instruction where it has one."""
        if self.cgroup is None:
            return subprocess.Popen(argv, **options)
        if self.owner.starts_inside:
            cgroup = open_cgroup(str(self.cgroup))
            try:
                return ClonedProcess(argv, cgroup_fd=cgroup, **options)
            finally:
                os.close(cgroup)
        return subprocess.Popen(
            ["/bin/sh", "-c", CGROUP_WRAPPER, str(self.cgroup), *argv], **options
        )

    def started(self, pid: int) -> None:
        """The program runs as ``pid``, leader of its own session (``start_new_session``)."""
        self.pgid = pid
        if self.cgroup is None and self.watched:
            self.owner.tell_watchdog(f"+pg {pid}")
        if self.scope is not None and not self.scope.add(self):
            self.kill()  # its trial was given up before it started

    def signal(self, sig: int) -> None:
        with self._end_lock:
            if self._ended:
                return
            if self.cgroup is not None:
                _signal_cgroup(self.cgroup, sig)
            if self.pgid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.pgid, sig)

    def kill(self) -> None:
        """SIGKILL every process of the tree; its cgroup is kept for the next run when already
        empty, else ended and removed. Only the first call acts (a trial given up and the run
        itself may both end it)."""
        if self.scope is not None:
            self.scope.discard(self)
        with self._end_lock:
            if self._ended:
                return
            self._ended = True
            if self.pgid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.pgid, signal.SIGKILL)
            if self.cgroup is not None:
                if not self.owner.keep_if_empty(self.cgroup):
                    self.owner.end_cgroup(self.cgroup)
            elif self.pgid is not None and self.watched:
                self.owner.tell_watchdog(f"-pg {self.pgid}")
