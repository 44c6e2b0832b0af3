"""JSON text of values encoded by the hundred thousand: each event's row and events.jsonl line,
and conversation.json with one entry per event.

orjson encodes them several times faster than the standard library (whose ``json.dumps`` with
``indent`` runs in pure Python: a second per 100,000 events). The text it writes differs from
``json.dumps``'s only in layout and in how a float is spelled (``0.00001`` for ``1e-05``), never
in the values read back. What orjson refuses (an integer outside 64 bits, a lone surrogate,
nesting past 254 levels, a key that is not a string) is written by the standard library, as
before; a NaN, which orjson writes as null, never reaches here from an event (see
``proctor.agent_events.storable_event``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from proctor.agent_events import AgentEvent


def compact_json(value: Any) -> str:
    """``value`` as JSON text with no spaces."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError included
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def indented_json(value: Any) -> str:
    """``value`` as JSON text indented by two spaces, as ``json.dumps(value, indent=2)``."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    except TypeError:
        return json.dumps(value, indent=2, ensure_ascii=False)


_KIND_JSON: dict[str, str] = {}


def events_jsonl_line(turn_index: int, event: AgentEvent, text: str) -> str:
    """The event's line of ``events.jsonl``, as ``json.dumps({"turn": …, **event.to_json()})``
    writes it, made from ``text``, the event's data already encoded for its row (each event's
    data is encoded once)."""
    data = event.data
    if "turn" in data or "kind" in data or "at" in data:  # they would replace the header's
        return json.dumps({"turn": turn_index, **event.to_json()}, ensure_ascii=False) + "\n"
    kind = _KIND_JSON.get(event.kind)
    if kind is None:
        kind = json.dumps(event.kind, ensure_ascii=False)
        if len(_KIND_JSON) < 100:
            _KIND_JSON[event.kind] = kind
    rest = "}" if text == "{}" else ", " + text[1:]
    return f'{{"turn": {turn_index}, "kind": {kind}, "at": {event.at_ms}{rest}\n'
