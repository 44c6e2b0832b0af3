"""Captured source text stored once: a case version keeps path -> SHA-256 of each file it
captured, and the text lives in one ``SourceFile`` row per distinct content.

Every case of an eval file captures the whole module, so storing the text in each version made
the database grow with (cases per file)²; now a thousand cases of one file share one row, and an
edited file adds one new row. The column keeps its name and its dict-of-texts interface:
``SourceTextsField`` writes texts as digests (storing any text not yet stored) and reads them
back as a ``CapturedSources`` mapping that fetches the texts in one query on first use, so
listing many versions costs nothing for their sources.

The table is shared by every organization: a digest is only ever computed here from text a
caller submitted, so a version can only name text its own organization submitted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from typing import Any

from django.db import models


class SourceFile(models.Model):
    """One captured source file's text, stored once however many case versions captured it."""

    digest = models.CharField(max_length=64, primary_key=True)  # SHA-256 of the UTF-8 text
    size = models.PositiveIntegerField(default=0)
    text = models.TextField()

    def __str__(self) -> str:
        return f"source {self.digest[:12]} ({self.size} characters)"


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def store_texts(texts: Mapping[str, str]) -> dict[str, str]:
    """Store each text not stored yet; returns path -> digest."""
    digests = {path: text_digest(text) for path, text in texts.items()}
    if not digests:
        return digests
    stored = set(
        SourceFile.objects.filter(digest__in=set(digests.values())).values_list("digest", flat=True)
    )
    missing = {d: texts[p] for p, d in digests.items() if d not in stored}
    if missing:
        # A concurrent batch may store the same file between the read and the write.
        SourceFile.objects.bulk_create(
            [SourceFile(digest=d, size=len(t), text=t) for d, t in missing.items()],
            ignore_conflicts=True,
        )
    return digests


class CapturedSources(Mapping[str, str]):
    """path -> text of a version's captured files, read from the store on first access."""

    def __init__(self, digests: Mapping[str, str]):
        self.digests = dict(digests)
        self._texts: dict[str, str] | None = None

    def _loaded(self) -> dict[str, str]:
        if self._texts is None:
            by_digest = dict(
                SourceFile.objects.filter(digest__in=set(self.digests.values())).values_list(
                    "digest", "text"
                )
            )
            self._texts = {path: by_digest[d] for path, d in self.digests.items() if d in by_digest}
        return self._texts

    def __getitem__(self, path: str) -> str:
        return self._loaded()[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self.digests)

    def __len__(self) -> int:
        return len(self.digests)

    def __contains__(self, path: object) -> bool:
        return path in self.digests

    def __repr__(self) -> str:
        return f"CapturedSources({sorted(self.digests)})"


class SourceTextsField(models.JSONField):
    """A JSON column of path -> digest that reads and writes path -> text (see the module)."""

    def get_prep_value(self, value: Any) -> Any:
        if isinstance(value, CapturedSources):
            return value.digests
        if isinstance(value, Mapping) and value:
            return store_texts(value)
        return super().get_prep_value(value)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        decoded = super().from_db_value(value, expression, connection)
        return CapturedSources(decoded) if isinstance(decoded, dict) else decoded
