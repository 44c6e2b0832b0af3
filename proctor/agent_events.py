"""An agent's event (:class:`AgentEvent`) and the rules that make any event safe to store.

Every harness builds these events: the command harness reads them from the protocol lines a
process prints (:mod:`proctor.protocol`), the others from their agent CLI's own output. The
recorder passes each through :func:`storable_event` before it is saved.

Normalized ``data`` per kind, as stored in ``Event.data`` and ``events.jsonl``:

- Started: ``session_id`` (str), ``model`` (str | None)
- Message: ``role`` ("assistant" | "user"), ``text`` (str), ``usage`` (Usage data | None)
- Command: ``command`` (str), ``exit_code`` (int | None), ``output`` (str),
  ``origin`` ("agent": printed by the process | "trace": seen by the shell recorder)
- FileChange: ``paths`` (list[str])
- ToolCall: ``call_id`` (str | None), ``name`` (str), ``input`` (str), ``output`` (str | None),
  ``error`` (str | None), ``status`` (str | None)
- Usage: ``input_tokens``, ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens``,
  ``total_tokens`` (ints >= 0), and ``cost_usd`` (a number >= 0, from ``costUsd``) when the
  agent reports what the step cost
- Finished: ``reason`` (str)
- ProtocolError: ``line`` (str), ``error`` (str)
- Log: ``stream`` (str), ``text`` (str): infrastructure notes such as prepare's output

Any kind may carry ``notes`` (list[str]) saying what was changed to make it storable.

Every byte an agent prints is safe to store (issue 11). What storing needs, in one place (what
a protocol line may hold is :mod:`proctor.protocol`'s to say):

- An integer outside signed 64 bits is clamped, noted; one the protocol reader kept as its
  digits (:class:`BigNumber`) is stored as those digits, quoted.
- ``at`` must lie between 1970 and the end of year 9999 (what a datetime holds), else it is
  stamped 0, noted.
- A NUL character (PostgreSQL text and jsonb refuse it) is shown as ``␀`` (U+2400); a lone
  surrogate (from a ``\ud800`` escape, or bytes that are not UTF-8) becomes U+FFFD. Both
  are noted in ``notes``. Bytes that are not UTF-8 reach the parser as U+FFFD already.
- A value nested deeper than MAX_NESTING levels is kept as JSON text, noted.
- :func:`storable_event` caps each text field at ``max_field_bytes`` UTF-8 bytes (the
  recorder passes ``PROCTOR_MAX_EVENT_FIELD_BYTES``, default 64 KiB), ending it with
  ``… [truncated: N bytes]`` (:func:`truncation_mark`), N the bytes not kept.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

# What a harness logs (a Log event) once it found its agent CLI's version, so compare can warn
# when two batches ran different versions (evals_app.comparison).
CLI_VERSION_NOTE = "agent CLI version: "

MIN_INT64, MAX_INT64 = -(2**63), 2**63 - 1
# 9999-12-31T23:59:59.999Z: the last instant Python's datetime (and so Django) can hold.
MAX_AT_MS = 253_402_300_799_999
DEFAULT_MAX_FIELD_BYTES = 64 * 1024
# Deeper values in events other harnesses build are kept as JSON text.
MAX_NESTING = 32
MAX_NOTES = 20
NUL_MARK = "\u2400"
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def truncation_mark(dropped_bytes: int) -> str:
    """The mark ending a value (or a line, or a log) cut at a cap: how many bytes are gone."""
    return f"… [truncated: {dropped_bytes} bytes]"


def cap_text(text: str, max_bytes: int) -> str:
    """``text`` if its UTF-8 form fits ``max_bytes``, else its start and the truncation mark,
    together at most ``max_bytes`` bytes (so capping twice changes nothing)."""
    if len(text) * 4 <= max_bytes:
        return text
    encoded = text.encode("utf-8", "replace")
    if len(encoded) <= max_bytes:
        return text
    mark_bytes = len(truncation_mark(len(encoded)).encode())
    kept = encoded[: max(max_bytes - mark_bytes, 0)].decode("utf-8", "ignore")
    return kept + truncation_mark(len(encoded) - len(kept.encode()))


@dataclass(slots=True)
class AgentEvent:
    kind: str
    data: dict[str, Any]
    at_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    # The output line the event was read from, as the agent printed it, when it was read from
    # one: what the redacting recorder checks its strings against (runner.core.reporting).
    # Not part of the event: never stored, compared or shown.
    line: str | None = field(default=None, compare=False, repr=False)
    # Set by parse_line's fast path, which vouches for all that storable_event checks but the
    # cap of a text field: the most UTF-8 bytes any text of ``data`` can hold, eight per
    # character of the line. A text taken from the line takes at most four bytes per
    # character; a tool input written again as JSON text at most 4.5 per character of the
    # line (a number: "1e15" becomes "1000000000000000.0"; a separator: "," becomes ", ").
    # 0: not known. A changed ``data`` is a new event.
    fits_in: int = field(default=0, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "at": self.at_ms, **self.data}


class BigNumber:
    """An integer literal outside signed 64 bits, kept as its digits (never converted: Python
    refuses to convert more than 4,300 digits, and no database column holds it)."""

    __slots__ = ("digits",)

    def __init__(self, digits: str) -> None:
        self.digits = digits


def cleaned_data(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with NUL and lone surrogates shown, numbers outside 64 bits kept as digits and
    nesting bounded, what changed listed in ``data["notes"]``; text is not capped (that is
    :func:`storable_event`'s, with the recorder's limit)."""
    notes: list[str] = []
    data = _storable(data, "", notes, None, 0)
    if notes:
        data["notes"] = _few(notes)
    return data


def _few(notes: list[str]) -> list[str]:
    """Each note once, at most MAX_NOTES of them."""
    unique = list(dict.fromkeys(notes))
    if len(unique) > MAX_NOTES:
        unique = [*unique[:MAX_NOTES], f"and {len(unique) - MAX_NOTES} more notes"]
    return unique


def storable_event(
    event: AgentEvent, *, max_field_bytes: int = DEFAULT_MAX_FIELD_BYTES
) -> AgentEvent:
    """``event`` made safe for any database and file: text cleaned and capped, numbers in
    64 bits, ``at`` in range, nesting bounded; what changed is listed in ``data["notes"]``.
    Events :func:`proctor.protocol.parse_line` made already meet all but the cap; other
    harnesses' may not."""
    if 0 < event.fits_in <= max_field_bytes or _plainly_storable(event, max_field_bytes):
        return event
    earlier = event.data.get("notes") if isinstance(event.data, dict) else None
    notes: list[str] = [str(n) for n in earlier] if isinstance(earlier, list) else []
    data = _storable(event.data, "", notes, max_field_bytes, 0)
    if not isinstance(data, dict):
        data = {"value": data}
    at = event.at_ms
    if not isinstance(at, int) or isinstance(at, bool) or not 0 <= at <= MAX_AT_MS:
        notes.append(f"at: {at!r} is out of range, stamped 0")
        at = 0
    if notes:
        data["notes"] = _few(notes)
    return AgentEvent(event.kind, data, at)


def _plainly_storable(event: AgentEvent, max_bytes: int) -> bool:
    """Whether ``event`` is flat (text, numbers, lists of text) and already storable as it
    is, which most events are: checked in one loop instead of copied field by field."""
    at = event.at_ms
    data = event.data
    if type(data) is not dict or type(at) is not int or not 0 <= at <= MAX_AT_MS:
        return False
    if "notes" in data:
        return False  # notes are deduplicated and counted by the careful path
    for key, value in data.items():
        # _plain_text inline for the keys and text values: this runs for every event.
        if type(key) is not str or len(key) > 50 or "\x00" in key:
            return False
        if not key.isascii() and LONE_SURROGATE.search(key):
            return False
        kind = type(value)
        if kind is str:
            if len(value) * 4 > max_bytes or "\x00" in value:
                return False
            if not value.isascii() and LONE_SURROGATE.search(value):
                return False
        elif kind is int:
            if not MIN_INT64 <= value <= MAX_INT64:
                return False
        elif kind is list:
            for item in value:
                if type(item) is not str or not _plain_text(item, max_bytes):
                    return False
        elif kind is dict:
            # A Message's usage: counts and a cost.
            for name, count in value.items():
                if type(name) is not str or len(name) > 50 or not _plain_text(name, 200):
                    return False
                if type(count) is int:
                    if not MIN_INT64 <= count <= MAX_INT64:
                        return False
                elif type(count) is not float or not math.isfinite(count):
                    return False
        elif kind is float:
            if not math.isfinite(value):
                return False
        elif value is not None and kind is not bool:
            return False
    return True


def _plain_text(text: str, max_bytes: int) -> bool:
    """No NUL, no lone surrogate, and surely within ``max_bytes`` UTF-8 bytes."""
    if len(text) * 4 > max_bytes or "\x00" in text:
        return False
    return text.isascii() or not LONE_SURROGATE.search(text)


def storable_text(text: str, *, max_bytes: int | None = None) -> str:
    """``text`` with NUL shown as ``␀``, lone surrogates as U+FFFD and, given ``max_bytes``,
    capped: for a stored answer, error or log line."""
    return _storable(text, "", [], max_bytes, 0)


def _storable(value: Any, key: str, notes: list[str], max_bytes: int | None, depth: int) -> Any:
    if isinstance(value, str):
        if "\x00" in value:
            notes.append(f"{key or 'text'}: {value.count(chr(0))} NUL byte(s) shown as {NUL_MARK}")
            value = value.replace("\x00", NUL_MARK)
        if LONE_SURROGATE.search(value):
            notes.append(f"{key or 'text'}: invalid UTF-8 or lone surrogates replaced with U+FFFD")
            value = LONE_SURROGATE.sub("\ufffd", value)
        if max_bytes is not None:
            capped = cap_text(value, max_bytes)
            if capped is not value:
                notes.append(f"{key or 'text'}: truncated to {max_bytes} bytes")
            value = capped
        return value
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not MIN_INT64 <= value <= MAX_INT64:
            notes.append(f"{key or 'value'}: an integer outside 64 bits, clamped")
            return MAX_INT64 if value > 0 else MIN_INT64
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            notes.append(f"{key or 'value'}: {value!r} is not a number JSON can store, kept null")
            return None
        return value
    if isinstance(value, BigNumber):
        notes.append(f"{key or 'value'}: an integer outside 64 bits, kept as its digits")
        return _storable(value.digits, key, notes, max_bytes, depth)
    if depth >= MAX_NESTING:
        notes.append(f"{key or 'value'}: nested deeper than {MAX_NESTING} levels, kept as text")
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (ValueError, RecursionError):
            text = repr(type(value))
        return _storable(text, key, notes, max_bytes, 0)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            name = _storable(str(k), "", [], 200, 0)
            out[name] = _storable(v, f"{key}.{name}" if key else name, notes, max_bytes, depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_storable(v, key, notes, max_bytes, depth + 1) for v in value]
    return _storable(str(value), key, notes, max_bytes, depth)
