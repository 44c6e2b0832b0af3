"""A worker's copies of bundles: unpacked once per digest under the cache folder, read from the
bundle store only the first time. A bundle never changes, so a copy is never refreshed."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from evals_app.bundle_archive import unpack_once
from evals_app.bundle_store import read_bundle
from evals_app.source_capture import BUNDLE_ROOT_MARKER


def _folder(organization_id: int, digest: str) -> Path:
    return Path(settings.CACHE_DIR) / "bundles" / str(organization_id) / digest


def is_unpacked(organization_id: int, digest: str) -> bool:
    """Whether the bundle's folder is in the cache (one look at the disk)."""
    return _folder(organization_id, digest).is_dir()


def unpacked(organization_id: int, digest: str, *, project: bool = False) -> Path:
    """The folder holding the bundle's files (a git bundle: ``commit.bundle`` in it). A
    project bundle is marked as its own project root. Raises MissingBundle."""
    dest = _folder(organization_id, digest)
    if dest.is_dir():
        return dest
    kind, data = read_bundle(organization_id, digest)
    return unpack_once(kind, lambda: data, dest, marker=BUNDLE_ROOT_MARKER if project else "")
