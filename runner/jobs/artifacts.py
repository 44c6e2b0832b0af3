"""Where a batch's and a trial's files live under the artifacts root."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings


def batch_dir(batch_id: int) -> Path:
    return Path(settings.ARTIFACTS_DIR) / "batches" / str(batch_id)


def trial_dir(batch_id: int, trial_id: int) -> Path:
    return batch_dir(batch_id) / "trials" / str(trial_id)


def write_text(folder: Path, relative_path: str, text: str) -> Path:
    target = (folder / relative_path).resolve()
    if folder.resolve() not in target.parents:
        raise ValueError(f"artifact path {relative_path} leaves the trial's folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target
