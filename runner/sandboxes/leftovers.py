"""Trial folders a crashed Proctor left behind, found by their owner and removed at start-up.

A Proctor process killed with SIGKILL cannot remove its sandbox folders (``proctor-trial-``) or
workspace snapshots (``proctor-snapshot-``). Each such folder is named after the process that
made it (``proctor-trial-<pid>-<start time>-xxxx``: the name is made with the folder, so no
window exists in which a folder has no owner), and the first sandbox a Proctor process creates
sweeps the temp folder of those whose owner is gone.

Removing a trial's folder is off the trial's path (``remove_later``): the folder is renamed at
once (so it is gone under its name the moment the trial ends) and deleted by one background
thread per process; the process waits for that thread before it exits. A process that dies
first (SIGKILL, an exit that skips atexit) leaves the folder to its watchdog, which deletes the
folders still listed once the process is gone, and the next start-up's sweep finds any left
(the renamed folder keeps its owner in its name).
"""

from __future__ import annotations

import functools
import re
import shutil
import tempfile
from pathlib import Path

from runner.sandboxes.containment import containment, identity_alive
from runner.sandboxes.off_the_path import OffThePath

_OWNED = re.compile(r"proctor-(?:trial|snapshot)-(\d+-\d+)-")


def owned_prefix(kind: str) -> str:
    """The ``mkdtemp`` prefix of a folder of ``kind`` ("trial", "snapshot") owned by this
    process."""
    return f"proctor-{kind}-{containment().identity}-"


def sweep_stale_folders(root: str | None = None) -> list[Path]:
    """Remove the trial folders and snapshots under ``root`` (the temp folder) whose owner
    process is gone; returns what was removed. Folders of live processes are left alone."""
    removed: list[Path] = []
    folder = Path(root or tempfile.gettempdir())
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = _OWNED.match(entry.name)
        if match is None or identity_alive(match.group(1)) or not entry.is_dir():
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


@functools.cache
def sweep_once() -> None:
    """The start-up sweep, once per process (the first sandbox it creates runs it)."""
    sweep_stale_folders()


def _remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    containment().tell_watchdog(f"-dir {folder}", prompt=False)


_removals: OffThePath[Path] = OffThePath("proctor-remover", _remove)


def remove_later(folder: Path) -> None:
    """Take ``folder`` out of the way now and delete it in the background (see the module's
    docstring). Safe for a folder that is already gone."""
    parked = folder.with_name(f"{folder.name}.removing")
    try:
        folder.rename(parked)
    except FileNotFoundError:
        return
    except OSError:  # cannot rename (a busy mount point): delete in place, now
        shutil.rmtree(folder, ignore_errors=True)
        return
    # Should this process die before the folder is gone, its watchdog deletes it.
    containment().tell_watchdog(f"+dir {parked}", prompt=False)
    _removals.put(parked)


def wait_for_removals() -> None:
    """Block until every folder handed to ``remove_later`` is deleted."""
    _removals.join()
