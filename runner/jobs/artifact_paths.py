"""Where a batch's and a trial's files live under the artifacts root."""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings

# How an artifact is opened: made or emptied, for writing.
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC


def batch_dir(batch_id: int) -> Path:
    return Path(settings.ARTIFACTS_DIR) / "batches" / str(batch_id)


def trial_dir(batch_id: int, trial_id: int) -> Path:
    return batch_dir(batch_id) / "trials" / str(trial_id)


def consultation_folder(kind: str, *, turn_index: int | None, check_index: int | None) -> str:
    """Where a consultation's prompt.json and verdict.json go, relative to the trial's folder,
    numbered from 1 as the dashboard numbers turns and checks: ``judges/check-<i>``, and
    ``responder/turn-<n>`` or ``simulated-user/turn-<n>`` for the reply after turn n."""
    if kind == "judge":
        return f"judges/check-{(check_index or 0) + 1}"
    prefix = "responder" if kind == "responder" else "simulated-user"
    return f"{prefix}/turn-{(turn_index or 0) + 1}"


def write_text(folder: Path, relative_path: str, text: str) -> Path:
    """Write ``relative_path`` under ``folder``, making its folders. A path that would leave
    ``folder`` (absolute, or climbing out with ``..``; a mock's name can be anything) is
    refused. Judged on the text alone: the folder is Proctor's own, so no link in it leads
    out, and every trial writes several files (resolving both paths cost a dozen system calls
    each time)."""
    relative = os.path.normpath(relative_path)
    if os.path.isabs(relative) or relative in (".", "..") or relative.startswith("../"):
        raise ValueError(f"artifact path {relative_path} leaves the trial's folder")
    target = folder / relative
    data = memoryview(text.encode("utf-8"))
    # Bytes through the descriptor, and folders made only when missing: none of a file
    # object's machinery (three system calls more: a stat, a terminal test, a seek) nor a
    # mkdir per file (a trial writes several, most in a folder that exists).
    try:
        fd = os.open(target, _NEW_FILE, 0o666)
    except FileNotFoundError:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, _NEW_FILE, 0o666)
    try:
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)
    return target
