"""Capturing the source of an eval's Python callables (validators, prepare) and its module.

Only files under the eval's project folder (the nearest folder above it holding a
``pyproject.toml``, else the eval file's own folder) are captured as text, so dependencies and
files elsewhere never end up in the database. A callable's source hash is always computed, so an
edit makes a new case version even when capture is off.
"""

from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CapturedCallable:
    qualname: str
    path: str | None  # relative to the project folder; None when outside it
    start: int
    end: int
    sha256: str
    text: str | None  # the whole file's text, when it may be captured

    def reference(self) -> dict[str, Any]:
        return {"qualname": self.qualname, "path": self.path, "start": self.start, "end": self.end}


# Written at the root of every unpacked bundle: a worker's copy of a project is its own root,
# whatever folder above the cache holds a pyproject.toml.
BUNDLE_ROOT_MARKER = ".proctor-bundle-root"


@lru_cache(maxsize=256)
def project_root(eval_file: Path) -> Path:
    for folder in eval_file.resolve().parents:
        if (folder / BUNDLE_ROOT_MARKER).is_file() or (folder / "pyproject.toml").is_file():
            return folder
    return eval_file.resolve().parent


def relative_to_root(path: Path, root: Path) -> str | None:
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return None


def read_source(file: Path) -> str:
    """The file's text, one shared string while the file is unchanged.

    Every case of an eval file captures the whole module: reading it once per case made a
    thousand-case file hold a thousand copies (and the process keep the memory afterwards)."""
    stat = file.stat()
    return _read_unchanged(str(file.resolve()), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _read_unchanged(path: str, mtime_ns: int, size: int) -> str:
    return Path(path).read_text(encoding="utf-8")


def capture_callable(func: Any, root: Path) -> CapturedCallable:
    """Where ``func`` is defined and a hash of its source (a subprocess-free file read)."""
    target = inspect.unwrap(func)
    qualname = getattr(target, "__qualname__", None) or type(target).__name__
    try:
        lines, start = inspect.getsourcelines(target)
        source = "".join(lines)
        file = Path(inspect.getsourcefile(target) or "")
    except (OSError, TypeError):
        # Built-ins and callables without source: the name is all that identifies them.
        return CapturedCallable(
            qualname, None, 0, 0, hashlib.sha256(qualname.encode()).hexdigest(), None
        )
    start = max(start, 1)
    relative = relative_to_root(file, root) if file.is_file() else None
    text = read_source(file) if relative is not None else None
    return CapturedCallable(
        qualname=qualname,
        path=relative,
        start=start,
        end=start + len(lines) - 1,
        sha256=hashlib.sha256(source.encode()).hexdigest(),
        text=text,
    )
