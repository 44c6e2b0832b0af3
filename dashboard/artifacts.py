"""Reading a trial's artifacts folder for the trial page: the file list, plan.md, and the
responder's verdicts. Every path is resolved inside the folder; nothing outside it is read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals_app.models import Trial

# The trial page lists at most this many files; the rest are counted, not listed.
MAX_LISTED_FILES = 300
# Larger plan.md or verdict files are not rendered on the page (they stay downloadable).
MAX_RENDERED_BYTES = 512_000


@dataclass(frozen=True)
class ArtifactFile:
    path: str  # relative to the trial's folder, with forward slashes
    size: int


@dataclass(frozen=True)
class ResponderVerdict:
    turn: int
    verdict: str
    reason: str
    reply: str
    path: str  # the verdict file, relative to the trial's folder
    raw: dict[str, Any]


def trial_folder(trial: Trial) -> Path | None:
    if not trial.artifacts_dir:
        return None
    folder = Path(trial.artifacts_dir)
    return folder if folder.is_dir() else None


def resolve_inside(folder: Path, relative: str) -> Path | None:
    """The file ``relative`` names inside ``folder``, or None when it leaves the folder (by
    ``..``, an absolute path or a symlink) or is not a regular file."""
    root = folder.resolve()
    try:
        target = (root / relative).resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop
        return None
    if not target.is_relative_to(root) or target == root or not target.is_file():
        return None
    return target


def list_files(folder: Path) -> tuple[list[ArtifactFile], int]:
    """Files under ``folder`` in path order (at most MAX_LISTED_FILES) and how many exist."""
    root = folder.resolve()
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        found.append(ArtifactFile(path.relative_to(root).as_posix(), path.stat().st_size))
    return found[:MAX_LISTED_FILES], len(found)


def read_small_text(folder: Path, relative: str) -> str | None:
    """A text artifact's content when it exists inside the folder and is small enough to show."""
    path = resolve_inside(folder, relative)
    if path is None or path.stat().st_size > MAX_RENDERED_BYTES:
        return None
    return path.read_text(encoding="utf-8", errors="replace")


_TURN_FOLDER = re.compile(r"turn-(\d+)")


def responder_verdicts(folder: Path) -> list[ResponderVerdict]:
    """The responder's verdict on each turn it was consulted, from
    ``responder/turn-<n>/verdict.json``, in turn order."""
    responder = folder / "responder"
    if not responder.is_dir():
        return []
    verdicts = []
    for turn_dir in responder.iterdir():
        match = _TURN_FOLDER.fullmatch(turn_dir.name)
        if not match:
            continue
        relative = f"responder/{turn_dir.name}/verdict.json"
        text = read_small_text(folder, relative)
        if text is None:
            continue
        try:
            raw = json.loads(text)
        except ValueError:
            raw = {"verdict": "unreadable", "reason": "verdict.json is not valid JSON"}
        if not isinstance(raw, dict):
            raw = {"verdict": str(raw)}
        verdicts.append(
            ResponderVerdict(
                turn=int(match.group(1)),
                verdict=str(raw.get("verdict") or raw.get("kind") or ""),
                reason=str(raw.get("reason") or ""),
                reply=str(raw.get("reply") or raw.get("answer") or raw.get("message") or ""),
                path=relative,
                raw=raw,
            )
        )
    return sorted(verdicts, key=lambda v: v.turn)
