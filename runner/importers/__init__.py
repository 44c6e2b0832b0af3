"""Turning what people already have into Proctor eval files.

``promptfoo`` translates a promptfoo config, ``transcripts`` turns recorded conversations into
simulated-user cases, ``starters`` holds the scenarios ``proctor init --multi-turn`` writes.
Each builds the file's source with ``python_source``; the management commands write it.
"""

from __future__ import annotations

from pathlib import Path


class ImportFailed(Exception):
    """Something the person gave cannot be read: the message is one sentence naming the file."""


def write_new_file(path: Path, text: str, *, replace: bool = False, hint: str = "") -> None:
    """Write ``text`` to ``path``, creating its folder; an existing file is kept unless
    ``replace``. ``hint`` ends the refusal's sentence (how to go on)."""
    if path.exists() and not replace:
        raise ImportFailed(f"{path} already exists{'; ' + hint if hint else ''}.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ImportFailed(f"cannot write {path}: {exc.strerror or exc}.") from None
