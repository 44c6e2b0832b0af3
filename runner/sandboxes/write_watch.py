"""Which files under the audited folders changed, known from inotify instead of a walk per trial.

The write audit (``runner.sandboxes.audit``) used to run ``find`` over the system folders after
every local trial: a process and a walk of thousands of entries, most of a no-op trial's time.
This watch is set up once per Proctor process (one inotify watch per folder, a walk at the
start) and afterwards costs nothing until an audit asks: the audit drains the kernel's queue of
what changed, and only those paths are looked at (their status-change time decides, as before).

The watch answers only for audits it can vouch for: it must have been in place before the
agent started (``since``), and the kernel must not have dropped events (its queue overflowed,
or the folder limit was reached). Otherwise ``changed_since`` returns None and the audit walks
the folders with ``find`` as it always did, so what is listed never depends on the shortcut.

The set-up walk (tens of milliseconds over a thousand folders, more on a cold cache) may run in
a thread of its own (``watch_in_background``), so the first agent of a process need not wait
for it: an agent that starts before the walk ends is one the watch cannot vouch for, and its
audit walks instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import threading
import time
from collections.abc import Sequence

from inotify_simple import INotify, flags

log = logging.getLogger(__name__)

# What makes a file's status change: written, created, moved in, its mode or owner changed.
WATCHED = (
    flags.MODIFY | flags.ATTRIB | flags.CREATE | flags.MOVED_TO | flags.CLOSE_WRITE
) | flags.DONT_FOLLOW
# Paths remembered between audits; past this the watch stops vouching for earlier agents
# (their audits walk instead) and starts afresh, so memory stays bounded.
MAX_REMEMBERED = 20_000


class WriteWatch:
    """One inotify instance over ``roots`` (each walked by ``set_up`` without leaving its file
    system), not looking inside ``skipped`` (Proctor's own folders: what it writes there is
    never listed)."""

    def __init__(self, roots: Sequence[str], skipped: Sequence[str] = ()) -> None:
        self.roots = tuple(roots)
        self._skipped = {os.path.realpath(path) for path in skipped}
        self._lock = threading.Lock()
        self._inotify = INotify(nonblocking=True)
        self._folders: dict[int, str] = {}
        self._changed: set[str] = set()
        # Audits of agents that started before this moment cannot trust the watch.
        self.vouches_from = float("inf")
        self._set_up = threading.Event()

    def set_up(self) -> None:
        """Watch every folder below the roots (the walk); from its end on, the watch vouches
        for agents that start later. Blocks for the walk."""
        try:
            with self._lock:
                ok = all(
                    self._watch_tree(root, os.lstat(root).st_dev, new=False) for root in self.roots
                )
                self.vouches_from = time.time() if ok else float("inf")
        except OSError as exc:  # a root vanished: this watch never vouches, audits walk
            log.info("the write audit cannot watch %s (%s); it walks instead", self.roots, exc)
        finally:
            self._set_up.set()

    def wait_until_set_up(self, timeout_s: float | None = None) -> bool:
        return self._set_up.wait(timeout_s)

    def close_descriptor(self) -> None:
        self._inotify.close()

    def _watch_tree(self, top: str, device: int, *, new: bool = True) -> bool:
        """Watch ``top`` and the folders below it on ``device``; False when the kernel refused
        (the per-user watch limit), after which this watch never vouches. ``new``: a folder
        created since the watch began, whose files are all changes."""
        for folder, subfolders, files in os.walk(top):
            try:
                wd = self._inotify.add_watch(folder, WATCHED)
            except OSError as exc:
                if exc.errno == 28:  # ENOSPC: out of watches
                    log.warning("the write audit cannot watch %s (%s); it walks instead", top, exc)
                    return False
                continue  # unreadable or gone: find could not list it either
            self._folders[wd] = folder
            if new:  # created while an agent ran: what is already in it is new too
                self._changed.update(os.path.join(folder, name) for name in files)
            kept = []
            for name in subfolders:
                with_path = os.path.join(folder, name)
                try:
                    if with_path not in self._skipped and os.lstat(with_path).st_dev == device:
                        kept.append(name)
                except OSError:
                    pass
            subfolders[:] = kept
        return True

    def changed_since(self, since: float) -> list[str] | None:
        """The paths (not folders) whose status changed at or after ``since``, as far as the
        watch saw; None when it cannot vouch for that moment (its set-up still runs, say)."""
        if not self._set_up.is_set():
            return None  # any agent audited now started before the watch could vouch
        with self._lock:
            self._drain()
            if since < self.vouches_from:
                return None
            found = []
            for path in self._changed:
                try:
                    info = os.lstat(path)
                except OSError:
                    continue  # deleted again: find would not list it either
                if not stat.S_ISDIR(info.st_mode) and info.st_ctime >= since:
                    found.append(path)
            return found

    def _drain(self) -> None:
        while True:
            try:
                events = self._inotify.read(timeout=0)
            except BlockingIOError:
                return
            if not events:
                return
            for event in events:
                if event.mask & flags.Q_OVERFLOW:
                    self._restart("the kernel dropped file events")
                    continue
                folder = self._folders.get(event.wd)
                if event.mask & flags.IGNORED:
                    self._folders.pop(event.wd, None)
                    continue
                if folder is None or not event.name:
                    continue
                path = os.path.join(folder, event.name)
                if event.mask & flags.ISDIR:
                    if event.mask & (flags.CREATE | flags.MOVED_TO):
                        try:
                            device = os.lstat(path).st_dev
                        except OSError:
                            continue
                        if not self._watch_tree(path, device):
                            self.vouches_from = float("inf")
                    continue
                self._changed.add(path)
            if len(self._changed) > MAX_REMEMBERED:
                self._restart("too many changed files to remember")

    def _restart(self, why: str) -> None:
        """Forget what was seen: audits of agents that started before now walk instead."""
        log.info("the write audit's watch starts afresh: %s", why)
        self._changed.clear()
        if self.vouches_from != float("inf"):
            self.vouches_from = time.time()


_watches: dict[tuple[str, ...], WriteWatch | None] = {}
_watches_lock = threading.Lock()


def _forget_in_child() -> None:
    """A forked child watches for itself: an inotify instance shared with the parent would hand
    each change to whichever process read first. The child's copies of the parent's
    descriptors are closed (the parent's stay open)."""
    global _watches_lock
    for made in _watches.values():
        if made is not None:
            with contextlib.suppress(OSError):
                made.close_descriptor()
    _watches.clear()
    _watches_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


def watch(roots: Sequence[str], skipped: Sequence[str] = ()) -> WriteWatch | None:
    """This process's watch over ``roots``, made and set up on first use (blocks for the walk,
    or for the background walk already under way); None where inotify is missing. ``skipped``
    counts only when the watch is made (a process's own folders do not change)."""
    made, new = _made(roots, skipped)
    if made is not None:
        if new:
            made.set_up()
        else:
            made.wait_until_set_up()
    return made


def watch_in_background(roots: Sequence[str], skipped: Sequence[str] = ()) -> WriteWatch | None:
    """Like ``watch``, but returns at once: a new watch walks the folders in a thread of its
    own, and vouches only for agents that start after that walk."""
    made, new = _made(roots, skipped)
    if made is not None and new:
        threading.Thread(target=made.set_up, name="proctor-write-watch", daemon=True).start()
    return made


def _made(roots: Sequence[str], skipped: Sequence[str]) -> tuple[WriteWatch | None, bool]:
    """This process's watch over ``roots`` (not yet set up when new), and whether it is new."""
    key = tuple(roots)
    with _watches_lock:
        if key in _watches:
            return _watches[key], False
        made: WriteWatch | None
        try:
            made = WriteWatch(key, skipped)
        except OSError as exc:
            log.info("the write audit cannot use inotify (%s); it walks instead", exc)
            made = None
        _watches[key] = made
        return made, made is not None


def existing_watch(roots: Sequence[str]) -> WriteWatch | None:
    with _watches_lock:
        return _watches.get(tuple(roots))
