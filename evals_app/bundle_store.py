"""Where bundles are kept: a table of blobs by default, or a folder (an object store mount every
worker shares) when ``PROCTOR_BUNDLE_STORE`` names one. Each organization's bundles are its
own; the same digest is stored once per organization however many versions use it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from evals_app.models import Bundle, Organization


class MissingBundle(Exception):
    """A run names a bundle the store does not hold (never uploaded, or its file is gone)."""


def _folder() -> Path | None:
    store = settings.BUNDLE_STORE
    return None if store in ("", "database") else Path(store)


def _file_for(organization_id: int, digest: str) -> Path:
    folder = _folder()
    assert folder is not None
    return folder / str(organization_id) / digest[:2] / digest


def missing_bundles(organization: Organization, digests: Iterable[str]) -> list[str]:
    """The digests of ``digests`` this organization has not stored yet (one query)."""
    wanted = list(dict.fromkeys(digests))
    have = set(
        Bundle.objects.filter(organization=organization, digest__in=wanted).values_list(
            "digest", flat=True
        )
    )
    return [d for d in wanted if d not in have]


def save_bundle(organization: Organization, digest: str, kind: str, data: bytes) -> bool:
    """Store a bundle unless it is there already; True when it was new."""
    if Bundle.objects.filter(organization=organization, digest=digest).exists():
        return False
    folder = _folder()
    if folder is not None:
        target = _file_for(organization.pk, digest)
        target.parent.mkdir(parents=True, exist_ok=True)
        # Write beside it and rename: a reader never sees half a file.
        handle, staging = tempfile.mkstemp(dir=target.parent, prefix=".upload-")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(staging, target)
    try:
        with transaction.atomic():
            Bundle.objects.create(
                organization=organization,
                digest=digest,
                kind=kind,
                size=len(data),
                data=None if folder is not None else data,
            )
    except IntegrityError:  # a concurrent upload of the same bundle won
        return False
    return True


def read_bundle(organization_id: int, digest: str) -> tuple[str, bytes]:
    """The bundle's kind and bytes. Raises MissingBundle with one sentence."""
    row = (
        Bundle.objects.filter(organization_id=organization_id, digest=digest)
        .values_list("kind", "data")
        .first()
    )
    if row is None:
        raise MissingBundle(f"bundle {digest[:12]} is not in this organization's store")
    kind, data = row
    if data is not None:
        return kind, bytes(data)
    path = _file_for(organization_id, digest) if _folder() is not None else None
    if path is None or not path.is_file():
        raise MissingBundle(
            f"bundle {digest[:12]} is recorded but its file is missing from the bundle store "
            f"({settings.BUNDLE_STORE})"
        )
    return kind, path.read_bytes()
