"""Reading a JSON object out of a model's answer.

Models asked for JSON mostly comply, but wrap it in a Markdown fence or a sentence often enough
that a strict parser would turn readable answers into failures.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCED = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)


def parse_json_answer(text: str) -> dict[str, Any] | None:
    """The object the answer holds: the whole answer, else the first fenced block that is one,
    else the first ``{...}`` in the text that parses. None when there is none."""
    whole = _as_object(text.strip())
    if whole is not None:
        return whole
    for match in _FENCED.finditer(text):
        fenced = _as_object(match.group(1).strip())
        if fenced is not None:
            return fenced
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _end = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def _as_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
