"""Reading one line of a CLI's JSON-lines output."""

from __future__ import annotations

import json
from typing import Any


def json_object(line: str) -> dict[str, Any] | None:
    """The JSON object on ``line``, or None for anything else (a log line, a list, bad JSON)."""
    stripped = line.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def object_at(obj: dict[str, Any], key: str) -> dict[str, Any]:
    """``obj[key]`` when it is an object, else an empty one (a field a CLI left out or changed)."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def as_json_text(value: Any) -> str:
    """A tool input or output as text: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def whole_number(value: Any) -> int:
    """A token count from a CLI: a non-negative int, or 0 when missing or malformed."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(0, int(value))
