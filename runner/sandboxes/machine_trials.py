"""Trials of every Proctor process on this machine, as the write audit needs to know them
(``runner.sandboxes.audit``): an agent's writes outside its workspace may be another trial's,
whichever Proctor process ran it (two `proctor worker`s, a `proctor eval` beside `proctor
serve`, a short eval that came and went while a long agent ran).

Each process that runs trials appends to a log of its own, in one folder for the machine
(``/dev/shm/proctor-trial-board``, else the temp folder's; ``PROCTOR_TRIAL_BOARD`` names
another). One 32-byte record as a trial starts and one as it ends: the time (CLOCK_MONOTONIC,
one clock for every process on the machine), how many trials the process has started and ended
so far, and when its oldest running trial started. Only the process writes its log, so nothing
is locked between processes. A log outlives its process, so at the end of an agent's run a
watch asks each other process's log how many of its trials ran at some moment of the run:
those running as it began (started less ended, at the last record before) and those started
since (the started counts' difference), the process being gone by then or not.

A process that exits cleanly leaves a note ``<identity>.ended-<ns>``: dead by then, so a watch
that begins later need not read its log. One killed mid-trial writes no end: its trials count
as running until it died. The first process to find it dead (a pidfd polled; its pid gone, or
reused: a log is named after the pid and the process's start time) leaves that note for it, so
a watch that begins later does not count it; a watch begun earlier does, never missing a trial
that may have run beside it.

Logs are removed by age, but only once no watch can need them: a watch runs inside a trial, so
none began before the oldest running trial of a live process (each log's last record says its
own). A process sweeps on its first trial and once a minute after: it notes the dead, and
removes the logs of processes dead since before that moment, with a margin. A log is split
into files of ``ROTATE_AFTER`` records, each starting with the state so far, so a process that
runs trials for months does not grow one file for good; its older files go by the same rule.

Costs, measured at load 7 (2 cores): a trial's start and end 10 µs together; a watch's end
0.1 ms with 3 other processes running trials and 200 gone (the folder's listing is read again
only when it changed).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import os
import select
import struct
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass

from runner.sandboxes.containment import identity_alive, process_identity

log = logging.getLogger(__name__)

FOLDER_ENV = "PROCTOR_TRIAL_BOARD"
# Time (ns), trials started, trials ended, start of the oldest running trial (ns; 0: none).
_RECORD = struct.Struct("=qqqq")
ROTATE_AFTER = 32_768  # records per file: 1 MiB
_TAIL_RECORDS = 16  # read at once from a log's end
# How often a watch's end asks whether another process is still alive (a syscall each time).
ASK_ALIVE_EVERY_NS = 500_000_000
SWEEP_EVERY_NS = 60 * 10**9
# Kept this long past the moment no watch could need them (none should, by then: a margin).
SWEEP_MARGIN_NS = 30 * 10**9
_ENDED = ".ended-"
_LOG = ".log"


def board_folder() -> str:
    """The machine's folder of trial logs (made on first use, writable by every user)."""
    folder = os.environ.get(FOLDER_ENV)
    if not folder:
        base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
        folder = os.path.join(base, "proctor-trial-board")
    if folder not in _made_folders:
        if not os.path.isdir(folder):
            with contextlib.suppress(OSError):
                os.makedirs(folder, mode=0o1777)
                os.chmod(folder, 0o1777)  # the umask took bits away; sticky, as /tmp
        _made_folders.add(folder)
    return folder


_made_folders: set[str] = set()


@dataclass(frozen=True)
class _Record:
    at: int
    started: int
    ended: int
    oldest_running: int

    @property
    def running(self) -> int:
        return self.started - self.ended


class MachineTrials:
    """This process's log on the machine's board, and what the others' logs say."""

    def __init__(self) -> None:
        self._start_afresh()

    def _start_afresh(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self.identity = ""
        self._fd: int | None = None
        self._folder = ""  # where this process's log is, chosen at its first trial
        self._generation = 0
        self._records = 0
        self._started = 0
        self._ended = 0
        self._running: dict[int, int] = {}  # a running trial's number -> its start
        self._next_sweep = 0

    def forget_after_fork(self) -> None:
        """A forked child keeps a log of its own (it is another process to the others)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)  # the child's copy; the parent's stays open
        self._start_afresh()

    # --- this process's log ----------------------------------------------------------------

    def trial_started(self) -> int:
        """Log a trial's start; returns its number for ``trial_ended``."""
        with self._lock:
            now = time.monotonic_ns()
            self._started += 1
            number = self._started
            self._running[number] = now
            self._append(now)
            sweep = now >= self._next_sweep and self._fd is not None
            if sweep:
                self._next_sweep = now + SWEEP_EVERY_NS
        if sweep:
            self.sweep()
        return number

    def trial_ended(self, number: int) -> None:
        with self._lock:
            if self._running.pop(number, None) is None:
                return  # started before a fork: the parent's trial
            self._ended += 1
            self._append(time.monotonic_ns())

    def _append(self, now: int) -> None:
        fd = self._own_log()
        if fd is None:
            return
        if self._records >= ROTATE_AFTER:
            fd = self._open_log(self._generation + 1, now)
            if fd is None:
                return
        self._write(fd, now)

    def _own_log(self) -> int | None:
        if self._pid == os.getpid():
            return self._fd
        self._pid = os.getpid()
        self.identity = process_identity(self._pid) or str(self._pid)
        self._folder = board_folder()
        atexit.register(self._note_exit, self._pid)
        return self._open_log(0, 0)

    def _note_exit(self, pid: int) -> None:
        """At a clean exit, no trial running: the note a reader would leave once it found this
        process dead, left now, so no reader opens this log again to learn it."""
        with self._lock:
            if os.getpid() != pid or self._running or self._fd is None:
                return  # a forked child's exit (the log is its parent's), or trials cut short
            os.close(self._fd)
            self._fd = None
            _leave_note(self._folder, self.identity)

    def _open_log(self, generation: int, now: int) -> int | None:
        """Start the log's file ``generation``; a later one begins with the state as of
        ``now`` (the moment of the record about to follow: times never go back in a log)."""
        path = _in(self._folder, _log_name(self.identity, generation))
        try:
            fd = os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o644
            )
        except OSError as exc:
            log.warning(
                "the machine's trial board cannot be written (%s); other Proctor processes'"
                " write audits will not count this one's trials",
                exc,
            )
            fd = None
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd, self._generation, self._records = fd, generation, 0
        if fd is not None and generation:
            # The state so far, so a reader need not look into the older file for it.
            self._write(fd, now)
        return fd

    def _write(self, fd: int, now: int) -> None:
        oldest = min(self._running.values(), default=0)
        try:
            os.write(fd, _RECORD.pack(now, self._started, self._ended, oldest))
            self._records += 1
        except OSError as exc:  # the folder is full: others will not see this trial
            log.warning("the machine's trial board cannot log a trial (%s)", exc)

    # --- the other processes' logs -----------------------------------------------------------

    def seen_between(self, begun: int, ended: int) -> dict[str, int]:
        """How many trials of each other process (by identity: ``<pid>-<start time>``) ran at
        some moment between ``begun`` and ``ended`` (``time.monotonic_ns()``s); processes with
        none are left out. Reads the folder and the logs of processes that may have run one."""
        folder = board_folder()
        listing = _listing(folder)
        seen: dict[str, int] = {}
        for identity, generations in listing.logs.items():
            if identity == self.identity or listing.dead_by.get(identity, ended) < begun:
                continue  # this process's own, or dead before the watch began
            count, last = _trials_between(folder, identity, generations, begun, ended)
            if count:
                seen[identity] = count
            if last is not None and identity not in listing.dead_by:
                # Killed, or gone without its exit note: later watches need not read its log,
                # nor count the trials it had running (found a moment late, they count them).
                _note_if_dead(folder, identity, unless_asked_within_ns=ASK_ALIVE_EVERY_NS)
        return seen

    def sweep(self) -> None:
        """Note the processes found dead, and remove the logs no watch can need any more."""
        folder = board_folder()
        listing = _listing(folder, fresh=True)
        logs, notes = listing.logs, listing.notes
        now = time.monotonic_ns()
        oldest_watch = now
        for identity, generations in logs.items():
            if identity in notes:
                continue
            if identity != self.identity and not _liveness.alive(identity):
                noted = _note_if_dead(folder, identity)
                notes[identity] = [noted if noted is not None else now]
                continue
            last = _end_record(_in(folder, _log_name(identity, generations[-1])))
            if last is not None and last.oldest_running:
                oldest_watch = min(oldest_watch, last.oldest_running)
        bound = oldest_watch - SWEEP_MARGIN_NS
        for identity, generations in logs.items():
            if min(notes.get(identity, [bound])) < bound:
                # Its logs before its notes: a reader skips a noted process's logs anyway.
                _remove(folder, [_log_name(identity, generation) for generation in generations])
                _remove(folder, [_note_name(identity, noted) for noted in notes[identity]])
                continue
            for older, newer in itertools.pairwise(generations):
                first = _end_record(_in(folder, _log_name(identity, newer)), first=True)
                if first is not None and first.at < bound:
                    _remove(folder, [_log_name(identity, older)])
        for identity, times in notes.items():
            if identity not in logs:  # its logs removed by a sweep that stopped short
                _remove(folder, [_note_name(identity, noted) for noted in times if noted < bound])


def _in(folder: str, name: str) -> str:
    return f"{folder}/{name}"


def _log_name(identity: str, generation: int) -> str:
    return f"{identity}.{generation:06d}{_LOG}"


def _note_name(identity: str, noted: int) -> str:
    return f"{identity}{_ENDED}{noted}"


@dataclass(frozen=True)
class _Listing:
    logs: dict[str, list[int]]  # a process's identity -> its log files' generations, in order
    notes: dict[str, list[int]]  # -> the times of the notes saying it is dead
    dead_by: dict[str, int]  # -> the earliest of those


# The last listing read and the folder's change time then: the folder changes only as a process
# logs its first trial or notes a dead one, so most watches need not list it again.
_listed: tuple[str, int, _Listing] | None = None
# How far a folder's change time may lag the clock (the kernel stamps it with a coarse one).
_STAMP_LAG_NS = 50_000_000


def _listing(folder: str, *, fresh: bool = False) -> _Listing:
    """Each process's log files (their generations, oldest first) and the times of the notes
    saying it is dead (several processes may have found it so). Not to be changed: it may be
    the one cached; ``fresh`` lists the folder anew and leaves the cache alone."""
    global _listed
    try:
        changed = os.stat(folder).st_mtime_ns
    except OSError:
        return _Listing({}, {}, {})
    known = _listed
    if not fresh and known is not None and known[0] == str(folder) and known[1] == changed:
        return known[2]
    listed_at = time.time_ns()
    logs: dict[str, list[int]] = defaultdict(list)
    notes: dict[str, list[int]] = defaultdict(list)
    try:
        names = os.listdir(folder)
    except OSError:
        return _Listing({}, {}, {})
    for name in names:
        if name.endswith(_LOG):
            identity, _, generation = name.removesuffix(_LOG).rpartition(".")
            if generation.isdigit():
                logs[identity].append(int(generation))
        elif _ENDED in name:
            identity, _, noted = name.partition(_ENDED)
            if noted.isdigit():
                notes[identity].append(int(noted))
    for generations in logs.values():
        generations.sort()
    listing = _Listing(dict(logs), dict(notes), {who: min(times) for who, times in notes.items()})
    # A change stamped within the clock's lag of this listing might keep the same time: then
    # the next watch lists again.
    if not fresh and changed < listed_at - _STAMP_LAG_NS:
        _listed = (str(folder), changed, listing)
    return listing


class _Liveness:
    """Whether other processes are alive, by identity, asked at every watch's end: a pidfd per
    process, opened once and checked against the identity after opening (a reused pid is not
    taken for the process), then polled (readable once the process has exited). Reading
    /proc/<pid>/stat each time cost 0.1 ms."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pidfds: dict[str, int] = {}
        self._asked: dict[str, int] = {}  # when each live one was last found alive

    def alive(self, identity: str, *, unless_asked_within_ns: int = 0) -> bool:
        """Whether ``identity`` runs; taken as yes when found so within the given time."""
        now = time.monotonic_ns()
        with self._lock:
            if now - self._asked.get(identity, -(2**62)) < unless_asked_within_ns:
                return True
            pidfd = self._pidfds.get(identity)
            if pidfd is None:
                pid = identity.partition("-")[0]
                try:
                    pidfd = os.pidfd_open(int(pid))
                except ProcessLookupError:
                    return False
                except (OSError, ValueError):
                    return identity_alive(identity)  # no pidfds here (before Linux 5.3)
                if process_identity(int(pid)) != identity:
                    os.close(pidfd)
                    return False
                self._pidfds[identity] = pidfd
            poll = select.poll()
            poll.register(pidfd, select.POLLIN)
            if not poll.poll(0):
                self._asked[identity] = now
                return True
            os.close(self._pidfds.pop(identity))
            self._asked.pop(identity, None)
            return False


_liveness = _Liveness()


def _note_if_dead(folder: str, identity: str, *, unless_asked_within_ns: int = 0) -> int | None:
    """Leave the note that ``identity`` is dead (when it is): its time, else None."""
    if _liveness.alive(identity, unless_asked_within_ns=unless_asked_within_ns):
        return None
    return _leave_note(folder, identity)


def _leave_note(folder: str, identity: str) -> int:
    """Note that ``identity`` is dead by now (an empty file: its name says it all)."""
    now = time.monotonic_ns()
    with contextlib.suppress(OSError):
        flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC
        os.close(os.open(_in(folder, _note_name(identity, now)), flags, 0o644))
    return now


def _trials_between(
    folder: str, identity: str, generations: list[int], begun: int, ended: int
) -> tuple[int, _Record | None]:
    """How many of ``identity``'s trials ran between ``begun`` and ``ended``, and its last
    record. Each of its files is opened once, newest first, older ones only when needed."""
    last = before = by_end = None
    for generation in reversed(generations):
        try:
            fd = os.open(_in(folder, _log_name(identity, generation)), os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue  # removed by a sweep: no watch needs it
        try:
            count = os.fstat(fd).st_size // _RECORD.size
            if not count:
                continue  # made, its first record not yet written: that trial did nothing yet
            if last is None:
                last = _read(fd, count - 1)
                if last.at < begun:
                    return last.running, last  # nothing since the watch began: as it was then
            if by_end is None:
                by_end = last if last.at <= ended else _at_or_before(fd, count, ended)
            before = _at_or_before(fd, count, begun - 1)
            if before is not None:
                break
        finally:
            os.close(fd)
    if last is None:
        return 0, None
    started_before, running_before = (before.started, before.running) if before else (0, 0)
    started_by_end = by_end.started if by_end else started_before
    return running_before + started_by_end - started_before, last


def _read(fd: int, index: int) -> _Record:
    return _Record(*_RECORD.unpack(os.pread(fd, _RECORD.size, index * _RECORD.size)))


def _end_record(path: str, *, first: bool = False) -> _Record | None:
    """A log file's last record (``first``: its first one); None when it has none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        count = os.fstat(fd).st_size // _RECORD.size
        return _read(fd, 0 if first else count - 1) if count else None
    finally:
        os.close(fd)


def _at_or_before(fd: int, count: int, moment: int) -> _Record | None:
    """The last of a file's ``count`` records written at or before ``moment``, None when
    there is none. The last few are read at once (a watch's usually lie there), the others by
    binary search, records being in time order."""
    tail = min(count, _TAIL_RECORDS)
    read = os.pread(fd, tail * _RECORD.size, (count - tail) * _RECORD.size)
    for fields in reversed(list(_RECORD.iter_unpack(read))):
        if fields[0] <= moment:
            return _Record(*fields)
    low, high = 0, count - tail - 1  # the answer, if any, is at ``low`` or before ``high``
    if high < 0 or _read(fd, 0).at > moment:
        return None
    while low < high:
        middle = (low + high + 1) // 2
        if _read(fd, middle).at <= moment:
            low = middle
        else:
            high = middle - 1
    return _read(fd, low)


def _remove(folder: str, names: list[str]) -> None:
    for name in names:
        with contextlib.suppress(OSError):  # gone already, or another user's
            os.unlink(_in(folder, name))


machine_trials = MachineTrials()
os.register_at_fork(after_in_child=machine_trials.forget_after_fork)
