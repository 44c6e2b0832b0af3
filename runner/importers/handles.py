"""Ids for generated suites and cases: lowercase words joined by single hyphens, unique."""

from __future__ import annotations

import re
import unicodedata

from proctor.rules import HANDLE_MAX


def slugify(text: str, *, fallback: str) -> str:
    """``"Interested lead (demo)"`` -> ``interested-lead-demo``; ``fallback`` when nothing is
    left."""
    ascii_text = unicodedata.normalize("NFKD", str(text)).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    # Keep whole words where the cut allows, so a long description gives a readable id.
    if len(slug) > HANDLE_MAX:
        cut = slug.rfind("-", 0, HANDLE_MAX + 1)
        slug = slug[: cut if cut > 0 else HANDLE_MAX].strip("-")
    return slug or fallback


class UniqueHandles:
    """Hands out ids, adding ``-2``, ``-3``... to one already given."""

    def __init__(self) -> None:
        self._taken: set[str] = set()

    def take(self, wanted: str) -> str:
        handle, number = wanted, 1
        while handle in self._taken:
            number += 1
            suffix = f"-{number}"
            handle = wanted[: HANDLE_MAX - len(suffix)].rstrip("-") + suffix
        self._taken.add(handle)
        return handle
