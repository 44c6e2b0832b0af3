"""A profile's ``run`` line with the words that name the profile's own files made absolute.

The run starts in the workspace, so ``python3 agent.py`` or ``bun run agent.ts`` (the profile's
folder holding ``agent.py``) would look for the script among the files under test. Copying the
profile into the workspace would put it in the graded diff; instead, before each turn, every
word of the line that

- stands outside quotes, between spaces or shell operators (``;`` ``&`` ``|`` ``(`` ``)``
  ``<`` ``>``),
- is a relative path (not starting with ``/``, ``~``, ``$`` or ``-``) of plain characters, and
- names a file in the profile's folder but nothing in the workspace

is replaced by that file's path in the sandbox (``$PROCTOR_PROFILE_DIR/agent.py``). The rule
works for any runtime and leaves alone words that name workspace files (``pytest tests``),
options, variables and anything quoted.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

_PLAIN = re.compile(r"[A-Za-z0-9_.+@%,:=][A-Za-z0-9_.+@%,:=/-]*\Z")
_OPERATORS = frozenset(";&|()<>")


def _words(line: str) -> list[tuple[int, int]]:
    """(start, end) of each unquoted word of a shell line; a word holding a quote or an escape
    anywhere is left out, as are words inside quotes."""
    spans: list[tuple[int, int]] = []
    start: int | None = None
    tainted = False
    index = 0
    while index <= len(line):
        char = line[index] if index < len(line) else " "
        if char.isspace() or char in _OPERATORS:
            if start is not None and not tainted:
                spans.append((start, index))
            start, tainted = None, False
        else:
            if start is None:
                start = index
            if char in "'\"":
                tainted = True
                closing = line.find(char, index + 1)
                index = len(line) if closing < 0 else closing
            elif char == "\\":
                tainted = True
                index += 1
            elif char in "`$":
                tainted = True
        index += 1
    return spans


def with_profile_paths(line: str, *, profile_dir: Path, workspace: Path, sandbox_dir: str) -> str:
    """``line`` with the words naming files of ``profile_dir`` (on the host) rewritten to
    ``sandbox_dir``/word, as the module docstring says."""
    pieces: list[str] = []
    last = 0
    for start, end in _words(line):
        word = line[start:end]
        if not _PLAIN.match(word) or ".." in word.split("/"):
            continue
        relative = word.removeprefix("./")
        if not (profile_dir / relative).is_file() or (workspace / relative).exists():
            continue
        pieces.append(line[last:start])
        pieces.append(shlex.quote(f"{sandbox_dir}/{relative}"))
        last = end
    pieces.append(line[last:])
    return "".join(pieces)
