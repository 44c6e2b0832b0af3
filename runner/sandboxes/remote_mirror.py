"""A remote sandbox's workspace and home, mirrored in a folder on the worker.

Everything above the sandbox (sources, harness set-up, validators, the workspace diff and the
stored workspace) reads and writes ``host_workspace`` and ``host_home`` as files on the worker.
A sandbox on another machine keeps them here and moves them across around each process it
runs: before it, the mirror goes up when something on the worker changed it since the last
trip; after it, the remote folders come back and replace the mirror. Each trip is one gzipped
tar archive, so a step costs two transfers whatever the number of files.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path

# The folders of a trial root that travel: the workspace and the home (a tmp stays behind).
MIRRORED = ("workspace", "home")


def signature(root: Path) -> tuple[tuple[str, int, int], ...]:
    """What the mirror holds, by path, size and change time: equal signatures mean nothing on
    the worker touched it since the last look."""
    entries: list[tuple[str, int, int]] = []
    for name in MIRRORED:
        for folder, dirs, files in os.walk(root / name):
            dirs.sort()
            for item in [*dirs, *sorted(files)]:
                path = os.path.join(folder, item)
                info = os.lstat(path)
                entries.append((os.path.relpath(path, root), info.st_size, info.st_mtime_ns))
    return tuple(entries)


def pack(root: Path) -> bytes:
    """The mirrored folders of ``root`` as one gzipped tar archive."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as archive:
        for name in MIRRORED:
            archive.add(root / name, arcname=name)
    return buffer.getvalue()


def unpack(root: Path, data: bytes) -> None:
    """Replace the mirrored folders of ``root`` with those in ``data`` (a ``pack`` of the
    remote side). Names that would land outside ``root`` are refused by the tar filter."""
    for name in MIRRORED:
        target = root / name
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.exists():
            shutil.rmtree(target)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        archive.extractall(root, filter="tar")
    for name in MIRRORED:
        (root / name).mkdir(exist_ok=True)
