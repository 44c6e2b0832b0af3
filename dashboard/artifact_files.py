"""Reading a trial's artifacts folder for the trial page: the file list, plan.md, and where
each consultation's prompt and verdict files are. Every path is resolved inside the folder;
nothing outside it is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evals_app.models import Consultation, Trial
from runner.jobs import artifact_paths

# The trial page lists at most this many files; the rest are counted, not listed.
MAX_LISTED_FILES = 300
# Larger plan.md or verdict files are not rendered on the page (they stay downloadable).
MAX_RENDERED_BYTES = 512_000


@dataclass(frozen=True)
class ArtifactFile:
    path: str  # relative to the trial's folder, with forward slashes
    size: int


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


def consultation_folder(consultation: Consultation) -> str:
    """Where the runner keeps a consultation's prompt.json and verdict.json, relative to the
    trial's folder: ``responder/turn-<n>``, ``simulated-user/turn-<n>``, ``judges/check-<i>``."""
    return artifact_paths.consultation_folder(
        consultation.kind,
        turn_index=consultation.turn_index,
        check_index=consultation.check_index,
    )


@dataclass(frozen=True)
class ConsultationFiles:
    """A consultation with links to its files, when they are on disk."""

    consultation: Consultation
    prompt_path: str | None
    verdict_path: str | None


def with_files(folder: Path | None, consultations: list[Consultation]) -> list[ConsultationFiles]:
    found = []
    for consultation in consultations:
        base = consultation_folder(consultation)
        paths = [f"{base}/{name}" for name in ("prompt.json", "verdict.json")]
        exists = [folder is not None and resolve_inside(folder, path) is not None for path in paths]
        found.append(
            ConsultationFiles(
                consultation, *(p if e else None for p, e in zip(paths, exists, strict=True))
            )
        )
    return found
