"""Writing eval files: SDK calls rendered as readable Python.

Importers describe what a file holds as values (``Call``, ``Name``, ``Spread``, plain strings,
numbers, lists and dicts) and this module turns them into source. Every piece of text that came
from outside (a config, a transcript, a model's answer) reaches the source only as a literal
built by ``repr()``, or as a comment from which every line break is removed, so no input can
become code.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

LINE_LENGTH = 100
INDENT = "    "
# Long text is cut into pieces of about this many characters, one literal per line.
TEXT_PIECE = 76
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Name:
    """A reference to something the generated file defines or imports (``shared_checks``)."""

    identifier: str

    def __post_init__(self) -> None:
        if not is_identifier(self.identifier):
            raise ValueError(f"{self.identifier!r} is not a Python identifier")


@dataclass(frozen=True)
class Spread:
    """``*name`` inside a list: the items of a list the file defines elsewhere."""

    name: Name


@dataclass(frozen=True)
class Call:
    """``function(*args, **kwargs)``; keyword arguments keep their order."""

    function: str
    args: tuple[Any, ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        for name in (self.function.split(".")) + [key for key, _ in self.kwargs]:
            if not is_identifier(name):
                raise ValueError(f"{name!r} is not a Python identifier")


def call(function: str, *args: Any, **kwargs: Any) -> Call:
    """A Call; keyword arguments whose value is None are left out (the SDK's default)."""
    return Call(function, tuple(args), tuple((k, v) for k, v in kwargs.items() if v is not None))


def is_identifier(text: str) -> bool:
    return bool(_IDENTIFIER.match(text)) and not keyword.iskeyword(text)


def identifier_for(handle: str, *, fallback: str = "value") -> str:
    """A module-level name for a handle such as ``acme-sales``: ``acme_sales``."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", handle).strip("_") or fallback
    if name[0].isdigit():
        name = f"{fallback}_{name}"
    if keyword.iskeyword(name):
        name += "_"
    return name


# --- literals --------------------------------------------------------------------------------


def string_literal(text: str) -> str:
    """A Python literal of ``text``: ``repr()``, in double quotes when that needs no escape."""
    literal = repr(text)
    if literal.startswith("'") and '"' not in text:
        literal = '"' + literal[1:-1] + '"'
    return literal


def comment_text(text: str) -> str:
    """``text`` made safe for a ``#`` comment: one line, nothing unprintable."""
    return "".join(ch if ch.isprintable() else " " for ch in str(text)).rstrip()


def _text_pieces(text: str) -> list[str]:
    """Long or multi-line text cut at line ends and spaces, so each piece reads as a line."""
    pieces: list[str] = []
    for line in text.splitlines(keepends=True):
        while len(line) > TEXT_PIECE:
            cut = line.rfind(" ", 0, TEXT_PIECE)
            if cut <= 0:
                cut = TEXT_PIECE
            else:
                cut += 1  # the space stays at the end of the piece
            pieces.append(line[:cut])
            line = line[cut:]
        if line:
            pieces.append(line)
    return pieces or [""]


# --- expressions -----------------------------------------------------------------------------


def render(value: Any, indent: int = 0, *, around: int = 0) -> str:
    """``value`` as a Python expression starting at ``indent`` levels; one line when it fits
    (counting the indent and ``around``, the characters beside it on its line), else spread
    over lines with trailing commas."""
    flat = _flat(value)
    if flat is not None and len(INDENT * indent) + around + len(flat) <= LINE_LENGTH:
        return flat
    return _spread(value, indent)


def _flat(value: Any) -> str | None:
    """The one-line form, or None when the value must span lines (multi-line text)."""
    if isinstance(value, str):
        return (
            None if "\n" in value.rstrip("\n") or len(value) > TEXT_PIECE else string_literal(value)
        )
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, Name):
        return value.identifier
    if isinstance(value, Spread):
        return "*" + value.name.identifier
    if isinstance(value, Call):
        parts = [_flat(arg) for arg in value.args] + [
            None if (flat := _flat(v)) is None else f"{k}={flat}" for k, v in value.kwargs
        ]
        return None if None in parts else f"{value.function}({', '.join(parts)})"  # type: ignore[arg-type]
    if isinstance(value, Mapping):
        items = [(_flat(str(k)), _flat(v)) for k, v in value.items()]
        if any(k is None or v is None for k, v in items):
            return None
        return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    if isinstance(value, Sequence):
        flats = [_flat(item) for item in value]
        if None in flats:
            return None
        inner = ", ".join(flats)  # type: ignore[arg-type]
        if isinstance(value, tuple):
            return f"({inner},)" if len(flats) == 1 else f"({inner})"
        return f"[{inner}]"
    raise TypeError(f"cannot write a {type(value).__name__} into an eval file")


def _spread(value: Any, indent: int) -> str:
    inner = INDENT * (indent + 1)
    closing = INDENT * indent
    if isinstance(value, str):
        pieces = _text_pieces(value)
        if len(pieces) == 1:
            return string_literal(pieces[0])
        body = "".join(f"{inner}{string_literal(piece)}\n" for piece in pieces)
        return f"(\n{body}{closing})"
    if isinstance(value, Call):
        lines = [f"{inner}{render(arg, indent + 1, around=1)},\n" for arg in value.args]
        lines += [
            f"{inner}{key}={render(v, indent + 1, around=len(key) + 2)},\n"
            for key, v in value.kwargs
        ]
        return f"{value.function}(\n{''.join(lines)}{closing})"
    if isinstance(value, Mapping):
        lines = []
        for k, v in value.items():
            key = string_literal(str(k))
            lines.append(f"{inner}{key}: {render(v, indent + 1, around=len(key) + 3)},\n")
        return "{\n" + "".join(lines) + closing + "}"
    if isinstance(value, Sequence):
        lines = [f"{inner}{render(item, indent + 1, around=1)},\n" for item in value]
        opening, ending = ("(", ")") if isinstance(value, tuple) else ("[", "]")
        return opening + "\n" + "".join(lines) + closing + ending
    raise TypeError(f"cannot spread a {type(value).__name__} over lines")


# --- modules ---------------------------------------------------------------------------------


@dataclass
class Module:
    """An eval file: a header, imports from ``proctor``, fixed functions and assignments.

    ``functions`` are source written by Proctor itself (never from input); ``assignments``
    are rendered from values.
    """

    header: Sequence[str] = ()
    notes: Sequence[str] = ()
    imports: set[str] = field(default_factory=set)
    functions: list[str] = field(default_factory=list)
    assignments: list[tuple[str, Any]] = field(default_factory=list)

    def assign(self, name: str, value: Any) -> Name:
        if not is_identifier(name):
            raise ValueError(f"{name!r} is not a Python identifier")
        self.assignments.append((name, value))
        return Name(name)

    def source(self) -> str:
        """The file's text, ending in one newline."""
        blocks: list[str] = []
        if self.header:
            blocks.append(_docstring("\n".join(self.header)))
        if self.notes:
            blocks.append("\n".join(f"# {comment_text(note)}".rstrip() for note in self.notes))
        used = sorted(self.imports | _names_called(self.assignments))
        if used:
            blocks.append(_import_line(used))
        body = [fn.strip("\n") for fn in self.functions]
        body += [
            f"{name} = {render(value, around=len(name) + 3)}" for name, value in self.assignments
        ]
        text = "\n\n".join(blocks)
        if body:
            # Two blank lines before a function, one after the imports before an assignment (isort).
            text += ("\n\n\n" if self.functions or not used else "\n\n") + "\n\n\n".join(body)
        return text + "\n"


def _docstring(text: str) -> str:
    """A triple-quoted docstring when the text allows one safely, else a plain literal."""
    safe = '"""' not in text and "\\" not in text and not text.endswith('"')
    safe = safe and all(ch.isprintable() or ch == "\n" for ch in text)
    return (
        f'"""{text}\n"""'
        if safe and "\n" in text
        else f'"""{text}"""'
        if safe
        else string_literal(text)
    )


def _import_line(names: list[str]) -> str:
    line = f"from proctor import {', '.join(names)}"
    if len(line) <= LINE_LENGTH:
        return line
    return "from proctor import (\n" + "".join(f"{INDENT}{name},\n" for name in names) + ")"


def _names_called(assignments: list[tuple[str, Any]]) -> set[str]:
    """The SDK functions the assignments call (``case``, ``assertion``...), for the import."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, Call):
            if "." not in value.function:
                found.add(value.function)
            for item in (*value.args, *(v for _, v in value.kwargs)):
                walk(item)
        elif isinstance(value, Mapping):
            for item in value.values():
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    for _, value in assignments:
        walk(value)
    return found
