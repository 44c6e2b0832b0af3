"""Trial folders a crashed Proctor left behind, found by their owner and removed at start-up.

A Proctor process killed with SIGKILL cannot remove its sandbox folders (``proctor-trial-``) or
workspace snapshots (``proctor-snapshot-``). Each such folder is named after the process that
made it (``proctor-trial-<pid>-<start time>-xxxx``: the name is made with the folder, so no
window exists in which a folder has no owner), and the first sandbox a Proctor process creates
sweeps the temp folder of those whose owner is gone.

A live process hands its trial folders back and reuses them (``runner.sandboxes.trial_folders``);
one that dies first (SIGKILL, an exit that skips atexit such as a stopping `proctor serve`'s
``os._exit``) leaves them to its watchdog, which deletes every folder named after the process
once it is gone, the ones kept for next trials (``<name>.spare``, ``<name>.r``) included,
whether or not a line told it of them; and the next start-up's sweep, or the sweep after a
re-queue, finds any left (a renamed folder keeps its owner in its name).
"""

from __future__ import annotations

import functools
import re
import shutil
import tempfile
from pathlib import Path

from runner.sandboxes.containment import OWNED_KINDS, containment, identity_alive

_OWNED = re.compile(rf"proctor-(?:{'|'.join(OWNED_KINDS)})-(\d+-\d+)-")


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
