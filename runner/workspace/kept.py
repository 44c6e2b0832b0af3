"""The final workspace a trial keeps, so that its checks can run again later without the agent
(``proctor regrade``).

Content-addressed and shared by every trial: each file's bytes are stored once, gzip-compressed,
under their sha256 (``<store>/ab/abcd….gz``); the list of a workspace's files (path, mode,
digest) is itself such a blob, its **manifest**, so trials that leave the same files share it
too, and a trial records only the manifest's digest (in ``conversation.json``). A workspace
whose files add up to more than the cap is not kept, and the record says so ("not kept: over
50 MB").

Off the trial's path: the trial only hashes the bytes its final snapshot already holds (the
workspace diff read them) and names the manifest; compressing and writing the blobs that the
store lacks is done by a background thread of the process (``OffThePath``, waited for at exit).
A blob is written under a temporary name and renamed, so a reader never finds half of one.

What is kept is what the diff sees: ``.git`` and the generated files it ignores (byte code,
tool caches, a suite's ``diff_ignore``) are left out, as is a case's cache folder.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from runner.sandboxes.off_the_path import OffThePath

FORMAT = 1
LINK_MODE = "120000"
EXECUTABLE_MODE = "100755"


@dataclass(frozen=True)
class WorkspaceStore:
    """Where kept workspaces live, and the most bytes of files one may hold."""

    root: Path
    max_bytes: int

    def blob_path(self, digest: str) -> Path:
        return self.root / digest[:2] / f"{digest}.gz"

    def read_blob(self, digest: str) -> bytes | None:
        """A blob's bytes, None when the store lacks it."""
        try:
            with gzip.open(self.blob_path(digest), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None


def megabytes(count: int) -> str:
    return f"{count / (1024 * 1024):.1f} MB"


def keep_workspace(
    store: WorkspaceStore, files: Iterable[tuple[str, str, bytes | None]], workspace: Path
) -> dict[str, Any]:
    """Keep a workspace's ``files`` (path, git mode, bytes; None for a large file, then read
    from ``workspace``) and return what the trial records of it: the manifest's digest with
    the count of files and bytes, or why it was not kept. The blobs are written off the path."""
    listed = list(files)
    total = 0
    for rel, mode, data in listed:
        if mode != LINK_MODE:
            total += len(data) if data is not None else _size(workspace / rel)
    if total > store.max_bytes:
        return {
            "not_kept": f"over {megabytes(store.max_bytes)} ({megabytes(total)} of files)",
            "bytes": total,
        }
    entries: dict[str, dict[str, Any]] = {}
    blobs: dict[str, bytes] = {}
    for rel, mode, data in listed:
        if data is None:
            try:
                data = (workspace / rel).read_bytes()
            except OSError:
                continue  # gone since the snapshot: nothing to keep
        if mode == LINK_MODE:
            entries[rel] = {"link": os.fsdecode(data)}
            continue
        digest = hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        entries[rel] = {"sha256": digest, "mode": mode, "size": len(data)}
    manifest = json.dumps({"format": FORMAT, "files": entries}, sort_keys=True).encode()
    manifest_digest = hashlib.sha256(manifest).hexdigest()
    blobs[manifest_digest] = manifest
    _writer.put((store, blobs))
    return {"manifest": manifest_digest, "files": len(entries), "bytes": total}


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _write_blobs(item: tuple[WorkspaceStore, dict[str, bytes]]) -> None:
    store, blobs = item
    for digest, data in blobs.items():
        target = store.blob_path(digest)
        if target.exists():
            continue  # another trial left the same bytes
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=".part-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(gzip.compress(data, compresslevel=6))
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


_writer: OffThePath[tuple[WorkspaceStore, dict[str, bytes]]] = OffThePath(
    "proctor-kept-workspaces", _write_blobs
)


def wait_until_written() -> None:
    """Block until every workspace this process handed off is in the store."""
    _writer.join()


class NotRestorable(Exception):
    """The kept workspace cannot be put back; the message is the one line to show."""


def restore_workspace(store: WorkspaceStore, kept: dict[str, Any] | None, folder: Path) -> int:
    """Write the kept workspace into ``folder`` (an empty workspace); returns its count of
    files. Raises NotRestorable in one line: not kept (too large, or recorded before
    workspaces were kept), or a blob missing from the store."""
    if not kept:
        raise NotRestorable("workspace not kept: the trial ran before Proctor kept workspaces")
    if kept.get("not_kept"):
        raise NotRestorable(f"workspace not kept: {kept['not_kept']}")
    wait_until_written()  # a trial of this very process may have handed its blobs off just now
    raw = store.read_blob(kept["manifest"])
    if raw is None:
        raise NotRestorable(
            f"workspace not kept: its manifest {kept['manifest'][:12]} is not in {store.root}"
        )
    files: dict[str, dict[str, Any]] = json.loads(raw)["files"]
    for rel, entry in files.items():
        relative = PurePosixPath(rel)
        if relative.is_absolute() or ".." in relative.parts:
            raise NotRestorable(f"workspace not kept: its manifest names {rel}, outside it")
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if "link" in entry:
            os.symlink(entry["link"], target)
            continue
        data = store.read_blob(entry["sha256"])
        if data is None:
            raise NotRestorable(
                f"workspace not kept: the content of {rel} ({entry['sha256'][:12]}) is not in "
                f"{store.root}"
            )
        target.write_bytes(data)
        if entry.get("mode") == EXECUTABLE_MODE:
            target.chmod(0o755)
    return len(files)
