"""A local trial's folder (``workspace``, ``home`` and ``tmp`` under one root): made, handed
back, emptied off the trial's path and used again.

On an ext4 disk making a folder costs about 0.1 ms and removing one about as much, against a
few microseconds for renaming one, so building a trial's four folders and deleting them was
much of what a short trial cost Proctor's own process. A handed-back root is renamed at once
(``<name>.spare``: the trial's folder is gone under its name the moment the trial ends), then
one background thread per process empties its three folders and keeps the root for the next
trial, which renames it to a name of its own. A root is only kept when it is exactly as it was
made: the three folders, real folders (not links), with their first mode and owner, and empty.
Anything else an agent left (a folder it made unreadable, a link in place of ``home``, a
changed mode) is deleted as before, and the next trial gets a new root.

At most ``SPARES_KEPT`` roots wait; the process deletes them before it exits, and its watchdog
deletes them should it die first or exit past atexit: they keep their owner in their name, and
the watchdog removes every folder named after its owner, so a line it never got (the lazy
``+dir``) loses nothing; the next start-up's sweep finds any left (``runner.sandboxes.leftovers``).
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

from runner.sandboxes.containment import containment
from runner.sandboxes.leftovers import owned_prefix, sweep_once
from runner.sandboxes.off_the_path import OffThePath

FOLDERS = ("home", "tmp", "workspace")
# Enough for every pool thread's next trial; more only holds disk.
SPARES_KEPT = 8
SPARE = ".spare"

_lock = threading.Lock()
_spares: list[Path] = []
# Each reused root gets a name no mkdtemp name can be (mkdtemp never uses '.').
_numbers = itertools.count(1)
# The mode and owner of a root and of each of its folders, as this process made them.
_made_as: dict[str, tuple[int, int]] = {}
# The process that registered ``_delete_spares`` to run at its exit (0: none yet).
_deletes_at_exit_in = 0


def take() -> Path:
    """A clean trial root holding empty ``workspace``, ``home`` and ``tmp`` folders."""
    sweep_once()  # the folders a crashed Proctor left
    while True:
        with _lock:
            spare = _spares.pop() if _spares else None
        if spare is None:
            return _make()
        fresh = spare.with_name(f"{owned_prefix('trial')}{next(_numbers)}.r")
        try:
            spare.rename(fresh)
        except OSError:  # rare (someone else removed or holds it): not worth a thread
            _delete(spare)
            continue
        containment().tell_watchdog(f"-dir {spare}", prompt=False)
        return fresh


def hand_back(root: Path) -> None:
    """The trial is done with ``root``: gone under its name now, reused or deleted later.
    Safe for a root that is already gone."""
    parked = root.with_name(f"{root.name}{SPARE}")
    try:
        root.rename(parked)
    except FileNotFoundError:
        return
    except OSError:  # cannot rename (a busy mount point): delete in place, now
        shutil.rmtree(root, ignore_errors=True)
        return
    # Should this process die before the folder is gone or reused, its watchdog deletes it.
    containment().tell_watchdog(f"+dir {parked}", prompt=False)
    _delete_spares_at_exit()
    _emptying.put(parked)


def wait_for_removals() -> None:
    """Block until every handed-back root is emptied or deleted."""
    _emptying.join()


def _make() -> Path:
    root = Path(tempfile.mkdtemp(prefix=owned_prefix("trial")))
    for name in FOLDERS:
        (root / name).mkdir()
    if not _made_as:
        for path, key in ((root, ""), *((root / name, name) for name in FOLDERS)):
            info = os.lstat(path)
            _made_as[key] = (info.st_mode, info.st_uid)
    return root


def _as_made(path: Path, key: str) -> bool:
    info = os.lstat(path)
    return stat.S_ISDIR(info.st_mode) and (info.st_mode, info.st_uid) == _made_as.get(key)


def _emptied(root: Path) -> bool:
    """Empty ``root``'s folders, if it is exactly as made; whether it now is a clean root."""
    try:
        if not _as_made(root, "") or sorted(os.listdir(root)) != list(FOLDERS):
            return False
        for name in FOLDERS:
            folder = root / name
            if not _as_made(folder, name):
                return False
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path)
                    else:
                        os.unlink(entry.path)
    except OSError:
        return False
    return True


def _empty_or_delete(parked: Path) -> None:
    with _lock:
        room = len(_spares) < SPARES_KEPT
    if room and _emptied(parked):
        with _lock:
            _spares.append(parked)
        return
    _delete(parked)


def _delete(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    containment().tell_watchdog(f"-dir {folder}", prompt=False)


def _delete_spares() -> None:
    """At exit, after the last hand-back: the roots kept for trials that will not come."""
    wait_for_removals()
    with _lock:
        spares, _spares[:] = list(_spares), []
    for spare in spares:
        _delete(spare)


def _delete_spares_at_exit() -> None:
    """Registered once per process, on its first hand-back: a worker process forked for trials
    runs only the exit functions registered in it (``runner.jobs.trial_processes``). It is
    registered before the remover thread's own wait, so it runs after it (atexit is last in,
    first out)."""
    global _deletes_at_exit_in
    with _lock:
        if _deletes_at_exit_in == os.getpid():
            return
        _deletes_at_exit_in = os.getpid()
    atexit.register(_delete_spares)


def _forget_in_child() -> None:
    """A forked child starts with no spares (the parent's are the parent's to reuse or delete)
    and a fresh lock (another thread may have held this one at the fork)."""
    global _lock
    _lock = threading.Lock()
    _spares.clear()


_emptying: OffThePath[Path] = OffThePath("proctor-remover", _empty_or_delete)
os.register_at_fork(after_in_child=_forget_in_child)
