"""Code an assertion runs, written as promptfoo writes it: a JavaScript or Python expression or
function body inline, or ``file://path.js[:function]`` / ``file://path.py[:function]``.

A file is read when the eval is defined, relative to the eval file, and its text travels with
the definition: the trial page shows the code that graded. It runs as the file it came from
(its ``__file__``, its folder's modules, ``require('./helper')``), found through ``location`` in
the project's copy where the trial runs, as an eval file's own paths are.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor.definitions import DefinitionError

FILE_PREFIX = "file://"
LANGUAGES = ("javascript", "python")
PYTHON_SUFFIXES = (".py",)
JAVASCRIPT_SUFFIXES = (".js", ".cjs", ".mjs", ".ts")


@dataclass(frozen=True)
class Script:
    language: str  # "javascript" or "python"
    text: str  # the inline code, or the file's whole text
    # A file's function to call (None: the file's default: get_assert/get_transform in Python,
    # the exported function in JavaScript); always None inline.
    function: str | None = None
    path: str | None = None  # the file as written, relative to the eval file; None inline
    # Where the file sat when it was read (absolute; recorded by its place in the project), so
    # it runs among its own folder's files; None inline.
    location: str | None = None

    @property
    def inline(self) -> bool:
        return self.path is None

    def shown(self) -> str:
        """How the definition names it: the reference, or the code itself."""
        if self.path is None:
            return self.text
        return f"{FILE_PREFIX}{self.path}" + (f":{self.function}" if self.function else "")

    def as_record(self) -> dict[str, Any]:
        record = {
            "language": self.language,
            "text": self.text,
            "function": self.function,
            "path": self.path,
        }
        if self.location is not None:
            record["location"] = self.location
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Script:
        return cls(
            language=record["language"],
            text=record["text"],
            function=record.get("function"),
            path=record.get("path"),
            location=record.get("location"),
        )


def script(code: str, *, language: str | None, folder: Path) -> Script:
    """``code`` as a Script: a ``file://`` reference is read now, relative to ``folder`` (the
    eval file's), and its language follows the file's suffix; inline code is ``language``."""
    if not code.startswith(FILE_PREFIX):
        if language not in LANGUAGES:
            raise DefinitionError(f"inline code needs a language ({' or '.join(LANGUAGES)})")
        return Script(language=language, text=code)
    written, function = split_reference(code)
    suffix = Path(written).suffix
    if suffix in PYTHON_SUFFIXES:
        found = "python"
    elif suffix in JAVASCRIPT_SUFFIXES:
        found = "javascript"
    else:
        raise DefinitionError(f"{code}: a code file ends in .py or .js (.cjs, .mjs)")
    if language is not None and found != language:
        raise DefinitionError(f"{code}: a {language} assertion runs a {language} file")
    path = Path(written)
    if not path.is_absolute():
        path = folder / path
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DefinitionError(f"{code}: cannot read {path} ({exc.strerror or exc})") from None
    return Script(
        language=found, text=text, function=function, path=written, location=os.path.abspath(path)
    )


def split_reference(code: str) -> tuple[str, str | None]:
    """("checks.js", "isPolite") from ``file://checks.js:isPolite``; a Windows drive letter
    (``file://C:/x.js``) is not a function name."""
    raw = code.removeprefix(FILE_PREFIX)
    head, sep, tail = raw.rpartition(":")
    if sep and tail and "/" not in tail and "\\" not in tail and len(head) > 1:
        return head, tail
    return raw, None


def caller_folder(depth: int) -> Path:
    """The folder of the file of the code ``depth`` frames above the caller (the working
    directory for code with no file)."""
    caller = sys._getframe(depth + 1).f_globals.get("__file__")
    return Path(caller).resolve().parent if caller else Path.cwd()
