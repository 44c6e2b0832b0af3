"""What an agent wrote outside its workspace and home.

Under ``bwrap`` and ``docker`` such writes fail (read-only system), so there is nothing to list.
The ``local`` sandbox cannot refuse them; instead the machine's usual writable places are
searched for files whose status changed since a moment taken before the agent ran. The status
change time (ctime) is used because a program cannot set it back, unlike the modification time.

Limits a reader should know: a deleted file or an empty new folder is not seen; anything else
on the machine writing at the same time (another trial, the worker itself) is listed too.

The folders are not walked per trial: ``watch_before_agent`` starts one inotify watch over
them per process (``runner.sandboxes.write_watch``), and an audit then looks only at the paths
the kernel reported changed. The watch's own set-up walk runs in the background, so the first
agent does not wait for it. Where the watch cannot vouch for the agent's whole run (the agent
started before the watch was set up, no inotify, too many folders, dropped events, roots it
does not cover) the audit walks the folders with ``find`` as before (about 30 ms here, more on
a cold cache), bounded by ``timeout_s``.

Writes are not attributed to a process: with several trials running at once (``proctor eval
-j N``'s worker processes, ``proctor serve``'s threads), each trial's list may hold the others'
writes. Rather than guess, ``ConcurrentTrials`` counts the trials that ran while the agent did,
in this process, in its sibling workers (``runner.sandboxes.sibling_trials``) and in every
other Proctor process on the machine (``runner.sandboxes.machine_trials``, a process that came
and went during the agent's run included), and the record says so ("may include writes of N
other trials running at the same time", with the other processes' pids). The secrets redacted
from the list are this process's trials' and its siblings'; an unrelated process's are its own.
"""

from __future__ import annotations

import contextlib
import fnmatch
import itertools
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from runner.sandboxes import sibling_trials, write_watch
from runner.sandboxes.base import Sandbox
from runner.sandboxes.machine_trials import machine_trials
from runner.sandboxes.processes import run_process

log = logging.getLogger(__name__)

# Where an agent on the host would leave something: configuration, installed software, homes,
# temporary folders. /proc, /sys, /dev and /run are not files an agent leaves behind.
# /usr (but /usr/local) and /root are left out: walking them costs seconds per trial, and the
# local sandbox already points HOME at the trial's own folder. /tmp and /var/tmp are left out
# too: every program on the machine scribbles there (a browser's profile, other test runs), so
# listing them would bury a real escape in noise, and the sandbox gives the agent its own TMPDIR.
AUDITED_ROOTS = ("/etc", "/usr/local", "/opt", "/srv", "/home")
# Other trials' own folders (concurrent trials) are theirs, not writes outside.
TRIAL_FOLDERS = "/tmp/proctor-trial-*"
AUDIT_TIMEOUT_S = 60.0
MAX_LISTED = 1000
# File times come from a clock that may lag the one read for ``since`` by a tick.
CLOCK_TICK_S = 0.05


@dataclass(frozen=True)
class SeenTrials:
    """The other trials that ran at some moment of an agent's run: how many, and their secrets
    (read when asked), which the audit's record must redact as their writes may be listed."""

    count: int
    secrets: Callable[[], list[str]]
    # Of the others, those in other Proctor processes (siblings included): pid -> trials.
    elsewhere: dict[int, int] = field(default_factory=dict)


class ConcurrentTrials:
    """Which other trials ran while a given trial's agent ran. ``running(secrets)`` wraps a
    whole trial (``secrets()`` gives that trial's secrets as they are now); ``watching(token)``
    wraps its agent's run and yields a function giving the ``SeenTrials``: those of this
    process, and those of its sibling worker processes when it is one
    (``sibling_trials.board``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._running: dict[int, Callable[[], Iterable[str]]] = {}
        # A watching trial -> the others of this process it saw run.
        self._seen: dict[int, dict[int, Callable[[], Iterable[str]]]] = {}

    @contextlib.contextmanager
    def running(self, secrets: Callable[[], Iterable[str]]) -> Iterator[int]:
        board = sibling_trials.board
        with self._lock:
            token = next(self._ids)
            self._running[token] = secrets
            for seen in self._seen.values():
                seen[token] = secrets
        if board is not None:
            board.trial_started()
        logged = machine_trials.trial_started()
        try:
            yield token
        finally:
            with self._lock:
                self._running.pop(token, None)
            if board is not None:
                board.trial_ended(secrets())
            machine_trials.trial_ended(logged)

    @contextlib.contextmanager
    def watching(self, token: int) -> Iterator[Callable[[], SeenTrials]]:
        board = sibling_trials.board
        with self._lock:
            seen = self._seen[token] = {
                other: secrets for other, secrets in self._running.items() if other != token
            }
            own = self._running.get(token)
        begun = None
        if board is not None:
            if own is not None:
                board.publish(own())  # before the agent runs: it cannot write what comes after
            begun = board.begin_watch()
        watch_began = time.monotonic_ns()

        def seen_trials() -> SeenTrials:
            siblings = board.seen_since(begun) if board is not None and begun is not None else 0
            elsewhere = machine_trials.seen_between(watch_began, time.monotonic_ns())
            theirs = list(seen.values())

            def secrets() -> list[str]:
                found = [secret for their in theirs for secret in their()]
                if siblings and board is not None:
                    found += board.secrets()
                return found

            by_pid: dict[int, int] = {}
            for identity, count in elsewhere.items():
                pid = int(identity.partition("-")[0])
                by_pid[pid] = by_pid.get(pid, 0) + count
            # The siblings are on the machine's board too; without it (unwritable), their own.
            other_processes = max(siblings, sum(elsewhere.values()))
            return SeenTrials(len(theirs) + other_processes, secrets, by_pid)

        try:
            yield seen_trials
        finally:
            with self._lock:
                self._seen.pop(token, None)


concurrent_trials = ConcurrentTrials()


def concurrency_note(others: int) -> str:
    """What an audit record says when ``others`` other trials ran beside the agent."""
    if not others:
        return ""
    return (
        f"may include writes of {others} other trial{'s' if others != 1 else ''} running at the "
        "same time"
    )


def _literal(path: str) -> str:
    """``path`` as a find -path pattern matching only itself."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", path)


def watch_before_agent(
    sandbox: Sandbox, *, ignore: Sequence[str] = (), roots: Sequence[str] = AUDITED_ROOTS
) -> None:
    """Make sure this process watches ``roots``, so the audits of agents that start once the
    watch is set up need not walk them (nothing to do for sandboxes that refuse outside
    writes). Returns at once: the set-up walk runs in the background, and an agent that starts
    before it ends is audited by the walk. ``ignore``: Proctor's own folders, never listed, so
    not watched either."""
    if getattr(sandbox, "confines_writes", False):
        return
    watch_in_advance(ignore=ignore, roots=roots)


def watch_in_advance(*, ignore: Sequence[str] = (), roots: Sequence[str] = AUDITED_ROOTS) -> None:
    """Start this process's watch now, before any agent (a worker process forked for trials
    starts it at once, so its first trials need not walk)."""
    write_watch.watch_in_background([root for root in roots if os.path.isdir(root)], ignore)


def _outside(path: str, pruned: Sequence[str]) -> bool:
    if fnmatch.fnmatchcase(path, TRIAL_FOLDERS):
        return False
    return not any(path == p or path.startswith(p.rstrip("/") + "/") for p in pruned)


def audit_writes(
    sandbox: Sandbox,
    since: float,
    *,
    roots: Sequence[str] = AUDITED_ROOTS,
    ignore: Sequence[str] = (),
    timeout_s: float = AUDIT_TIMEOUT_S,
    until: float | None = None,
) -> list[str]:
    """Paths outside ``sandbox``'s folders that were created or changed since ``since`` (a
    ``time.time()`` taken before the agent started), sorted, at most MAX_LISTED.

    Empty for sandboxes that refuse such writes. ``ignore`` names more folders to leave out
    (Proctor's own home, artifacts and cache). The process's watch answers when it can vouch
    for ``since``; else ``find`` walks ``roots`` (a subprocess): if it runs out of
    ``timeout_s`` what it found so far is returned and a warning logged.
    """
    watched = audit_writes_if_watched(sandbox, since, roots=roots, ignore=ignore, until=until)
    if watched is not None:
        return watched
    existing = [root for root in roots if os.path.isdir(root)]
    own_real = _own_folders(sandbox, ignore)
    pruned = [_literal(p) for p in own_real] + [TRIAL_FOLDERS]
    prune_expr: list[str] = []
    for pattern in pruned:
        prune_expr += [*(["-o"] if prune_expr else []), "-path", pattern]
    argv = [
        "find",
        *existing,
        "-xdev",
        "(",
        *prune_expr,
        ")",
        "-prune",
        "-o",
        "!",
        "-type",
        "d",
        "-newerct",
        f"@{since - CLOCK_TICK_S:.6f}",
        "-print0",
    ]
    # find exits 1 when some folder is unreadable; what it printed is still right.
    found = run_process(argv, timeout_s=timeout_s)
    if found.timed_out:
        log.warning(
            "the write audit stopped after %.0f s; the list of writes may be incomplete", timeout_s
        )
    elif found.exit_code == 127 and not found.stdout:
        log.warning("the write audit could not run find: %s", found.stderr.strip())
        return []
    paths = sorted({p for p in found.stdout.split("\0") if p})
    if until is not None:
        paths = [p for p in paths if _changed_by(p, until)]
    return paths[:MAX_LISTED]


def audit_writes_if_watched(
    sandbox: Sandbox,
    since: float,
    *,
    roots: Sequence[str] = AUDITED_ROOTS,
    ignore: Sequence[str] = (),
    until: float | None = None,
) -> list[str] | None:
    """What ``audit_writes`` says, when it can say it without walking the folders (the watch
    vouches for ``since``, or nothing is to be audited): a fraction of a millisecond, so a
    trial need not hand it to another thread. None when only a walk can tell."""
    if getattr(sandbox, "confines_writes", False):
        return []
    existing = [root for root in roots if os.path.isdir(root)]
    if not existing:
        return []
    watch = write_watch.existing_watch(existing)
    seen = watch.changed_since(since - CLOCK_TICK_S) if watch is not None else None
    if seen is None:
        return None
    if not seen:
        return []  # the usual answer, known without resolving the sandbox's own folders
    own_real = _own_folders(sandbox, ignore)
    paths = sorted(p for p in seen if _outside(p, own_real))
    if until is not None:
        paths = [p for p in paths if _changed_by(p, until)]
    return paths[:MAX_LISTED]


def _own_folders(sandbox: Sandbox, ignore: Sequence[str]) -> list[str]:
    """The sandbox's folders and ``ignore``d ones, resolved: never an outside write."""
    own = [getattr(sandbox, "root", None), sandbox.host_workspace, sandbox.host_home, *ignore]
    return [os.path.realpath(str(p)) for p in own if p is not None]


def _changed_by(path: str, until: float) -> bool:
    """Whether ``path`` last changed no later than ``until`` (a file changed after the agent
    finished, by a check say, is not the agent's)."""
    try:
        return os.lstat(path).st_ctime <= until + CLOCK_TICK_S
    except OSError:
        return True
