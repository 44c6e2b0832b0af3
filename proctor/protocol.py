"""The command harness event protocol: one JSON object per stdout line, tagged by ``_tag``.

Shared by the runner (which parses what an agent process prints) and the runner kit (which
refuses to print what the runner would refuse), so both apply one set of rules.

A line with a known tag is checked field by field and becomes an :class:`AgentEvent` with
snake_case data (each kind's data: :mod:`proctor.agent_events`); a known tag with wrong fields
becomes a ``ProtocolError`` event (never accepted silently); any other line is not an event
(ordinary logging) and stays only in the raw log.

Every byte an agent prints is safe to store (issue 11). What a line may hold:

- An integer outside signed 64 bits in a counted field (``exitCode``, token counts, ``at``) is
  a protocol error; inside a tool's free-form ``input``/``output`` it is kept as its digits,
  quoted.
- ``at`` must lie between 1970 and the end of year 9999 (what a datetime holds), else a
  protocol error.
- A NUL character or a lone surrogate is cleaned as :mod:`proctor.agent_events` says, noted
  in ``notes``.
- A line nested too deeply for Python's json reader is a protocol error when it names a
  ``_tag``, ordinary logging otherwise.
- A line over MAX_LINE_CHARS (16 Mi characters; it is not parsed), or one the reader cut at its
  length cap (it ends with :func:`~proctor.agent_events.truncation_mark`), is a protocol error
  when it names a known ``_tag``.

Text fields are not capped here: :func:`~proctor.agent_events.storable_event` does that, with
the recorder's limit.
"""

from __future__ import annotations

import json
import math
import re
import time
from typing import Any

from proctor.agent_events import (
    LONE_SURROGATE,
    MAX_AT_MS,
    MAX_INT64,
    MIN_INT64,
    AgentEvent,
    BigNumber,
    cleaned_data,
)

try:
    import orjson
except ImportError:  # the runner kit in a container, on the image's own python3
    orjson = None  # type: ignore[assignment]

KNOWN_TAGS = ("Started", "Message", "Command", "FileChange", "ToolCall", "Usage", "Finished")

# A longer line is not parsed (parsing copies it): a protocol error when it names a known tag.
MAX_LINE_CHARS = 16 * 1024 * 1024
# A line that ends with truncation_mark: the reader cut it at its length cap.
_TRUNCATED = re.compile(r"… \[truncated: \d+ bytes\]$")


class ProtocolViolation(ValueError):
    """A line with a known tag whose fields break the protocol."""


def _read_int(digits: str) -> int | BigNumber:
    if len(digits) > 20:
        return BigNumber(digits)
    value = int(digits)
    return value if MIN_INT64 <= value <= MAX_INT64 else BigNumber(digits)


def _out_of_range(key: str) -> ProtocolViolation:
    return ProtocolViolation(f"field {key!r} is outside the signed 64-bit integer range")


def _text(obj: dict, key: str, *, required: bool = True, nullable: bool = False) -> str | None:
    if key not in obj:
        if required:
            raise ProtocolViolation(f"missing field {key!r}")
        return None
    value = obj[key]
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise ProtocolViolation(f"field {key!r} must be a string")
    return value


def _count(obj: dict, key: str, *, required: bool) -> int:
    if key not in obj:
        if required:
            raise ProtocolViolation(f"missing field {key!r}")
        return 0
    value = obj[key]
    if isinstance(value, BigNumber):
        raise _out_of_range(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProtocolViolation(f"field {key!r} must be a whole number, zero or more")
    return value


def _as_text(value: Any) -> str:
    """A tool input or output that is not a string is kept as JSON, as the kit writes it."""
    if isinstance(value, str):
        return value
    return _free_form_json(value)


def _digits(value: Any) -> str:
    if isinstance(value, BigNumber):
        return value.digits
    raise TypeError(f"{type(value).__name__} is not JSON")


# json.dumps(value, ensure_ascii=False, default=_digits) with its C encoder made once, not once
# per tool call (most of the cost). No circular check: a parsed value holds no cycle.
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)  # None without the C module
_c_free_form_json = (
    _c_make_encoder(
        None, _digits, json.encoder.encode_basestring, None, ": ", ", ", False, False, True
    )
    if _c_make_encoder is not None
    else None
)


def _free_form_json(value: Any) -> str:
    if _c_free_form_json is None:
        return json.dumps(value, ensure_ascii=False, default=_digits)
    return "".join(_c_free_form_json(value, 0))


def _usage(obj: dict) -> dict[str, int | float]:
    usage: dict[str, int | float] = {
        "input_tokens": _count(obj, "inputTokens", required=True),
        "output_tokens": _count(obj, "outputTokens", required=True),
        "cache_read_tokens": _count(obj, "cacheReadTokens", required=False),
        "cache_write_tokens": _count(obj, "cacheWriteTokens", required=False),
    }
    total = obj.get("totalTokens")
    usage["total_tokens"] = (
        _count(obj, "totalTokens", required=False)
        if total is not None
        else usage["input_tokens"] + usage["output_tokens"]
    )
    cost = obj.get("costUsd")
    if cost is not None:
        if (
            isinstance(cost, bool | BigNumber)
            or not isinstance(cost, int | float)
            or not math.isfinite(cost)
            or cost < 0
        ):
            raise ProtocolViolation("field 'costUsd' must be a number of US dollars, zero or more")
        usage["cost_usd"] = float(cost)
    return usage


def _fields(tag: str, obj: dict) -> dict[str, Any]:
    usual = _usual_fields(tag, obj)
    if usual is not None:
        return usual
    if tag == "Started":
        return {
            "session_id": _text(obj, "sessionId"),
            "model": _text(obj, "model", required=False, nullable=True),
        }
    if tag == "Message":
        # A missing role is the assistant's; any other value, "" included, must be one of two.
        role = _text(obj, "role", required=False) if "role" in obj else "assistant"
        if role not in ("assistant", "user"):
            raise ProtocolViolation("field 'role' must be 'assistant' or 'user'")
        usage = obj.get("usage")
        if usage is not None and not isinstance(usage, dict):
            raise ProtocolViolation("field 'usage' must be an object")
        return {
            "role": role,
            "text": _text(obj, "text"),
            # An empty object is checked too: it lacks the required counts.
            "usage": None if usage is None else _usage(usage),
        }
    if tag == "Command":
        if "exitCode" not in obj:
            raise ProtocolViolation("missing field 'exitCode' (it may be null)")
        exit_code = obj["exitCode"]
        if isinstance(exit_code, BigNumber):
            raise _out_of_range("exitCode")
        if exit_code is not None and (
            isinstance(exit_code, bool) or not isinstance(exit_code, int)
        ):
            raise ProtocolViolation("field 'exitCode' must be an integer or null")
        return {
            "command": _text(obj, "command"),
            "exit_code": exit_code,
            "output": _text(obj, "output", required=False, nullable=True) or "",
            "origin": "agent",
        }
    if tag == "FileChange":
        paths = obj.get("paths")
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise ProtocolViolation("field 'paths' must be a list of strings")
        return {"paths": paths}
    if tag == "ToolCall":
        for key in ("callId", "status"):
            if key not in obj:
                raise ProtocolViolation(f"missing field {key!r} (it may be null)")
        if "input" not in obj:
            raise ProtocolViolation("missing field 'input'")
        output, error = obj.get("output"), obj.get("error")
        return {
            "call_id": _text(obj, "callId", nullable=True),
            "name": _text(obj, "name"),
            "input": _as_text(obj["input"]),
            "output": None if output is None else _as_text(output),
            "error": None if error is None else _as_text(error),
            "status": _text(obj, "status", nullable=True),
        }
    if tag == "Usage":
        return _usage(obj)
    if tag == "Finished":
        return {"reason": _text(obj, "reason")}
    raise AssertionError(tag)


_MISSING: Any = object()
_ROLES = ("assistant", "user")


def _usual_fields(tag: str, obj: dict) -> dict[str, Any] | None:
    """What :func:`_fields` makes of the usual event of the busiest kinds (every field present
    and of its plain type), checked inline: the first thing ``_fields`` tries. None for
    anything else, which ``_fields`` then reads field by field with its exact errors. It runs
    for each line an agent prints, where a helper call per field was most of the parse."""
    get = obj.get
    if tag == "Message":
        role, text = get("role", "assistant"), get("text")
        if type(text) is str and type(role) is str and role in _ROLES and get("usage") is None:
            return {"role": role, "text": text, "usage": None}
    elif tag == "Command":
        command, exit_code, output = get("command"), get("exitCode", _MISSING), get("output")
        if (
            type(command) is str
            and (exit_code is None or type(exit_code) is int)
            and (output is None or type(output) is str)
        ):
            return {
                "command": command,
                "exit_code": exit_code,
                "output": output or "",
                "origin": "agent",
            }
    elif tag == "ToolCall":
        call_id, name, status = get("callId", _MISSING), get("name"), get("status", _MISSING)
        tool_input, output, error = get("input", _MISSING), get("output"), get("error")
        if (
            (call_id is None or type(call_id) is str)
            and type(name) is str
            and (status is None or type(status) is str)
            and tool_input is not _MISSING
        ):
            return {
                "call_id": call_id,
                "name": name,
                "input": tool_input if type(tool_input) is str else _free_form_json(tool_input),
                "output": None if output is None else _as_text(output),
                "error": None if error is None else _as_text(error),
                "status": status,
            }
    return None


def parse_line(line: str, *, now_ms: int | None = None) -> AgentEvent | None:
    """The event a stdout line carries, a ProtocolError event, or None for a non-event line.

    Never raises, whatever the line holds; what it returns is safe to store but for the
    length of its text fields (see :func:`storable_event`)."""
    stripped = line.strip()
    if not stripped.startswith("{"):
        return None
    stamp = now_ms if now_ms is not None else int(time.time() * 1000)
    if (
        len(stripped) <= MAX_LINE_CHARS
        and stripped[-1] == "}"  # so it does not end with the reader's truncation mark
        and "\\u" not in stripped  # an escape could make NUL or a lone surrogate
        and "\x00" not in stripped
        and (stripped.isascii() or not LONE_SURROGATE.search(stripped))
    ):
        event = _parse_plain(stripped, stamp)
        if event is not _CHECK_CLOSELY:
            return event
    return _parse_checked(stripped, stamp)


# What _parse_plain returns for a line it cannot vouch for: the careful path reads it again.
_CHECK_CLOSELY: Any = object()
_loads = orjson.loads if orjson is not None else json.loads
# A tool call's free-form fields, where a number outside 64 bits is kept quoted, as its digits.
_FREE_FORM = ("input", "output", "error")


def _parse_plain(stripped: str, stamp: int) -> AgentEvent | None:
    """The fast path for a well-formed line that needs no cleaning: one ``orjson.loads`` and
    the kind's field checks. Whatever it is unsure of (a number outside 64 bits, anything
    orjson refuses: NaN, deep nesting, bad JSON; any protocol error) goes to
    :func:`_parse_checked`, which then says exactly what is wrong; what it accepts is what that
    path would make of the line.

    orjson reads an integer past 64 unsigned bits as a float, so a number outside signed 64
    bits is looked for as either: a float that large (rare as a float) takes the careful path.
    """
    try:
        obj = _loads(stripped)
    except (ValueError, RecursionError):  # orjson's JSONDecodeError is a ValueError
        return _CHECK_CLOSELY
    if type(obj) is not dict:
        return None
    tag = obj.get("_tag")
    if type(tag) is not str or tag not in KNOWN_TAGS:
        return None
    # A number outside 64 bits in a counted field (a Usage's counts, a Message's usage, an
    # exit code) is an error the careful path reports; in a tool's free-form fields, it is
    # kept quoted. Other fields take no number (``at`` is checked below).
    if tag == "Usage":
        if not _in_int64(obj.values()):
            return _CHECK_CLOSELY
    elif tag == "Message":
        usage = obj.get("usage")
        if type(usage) is dict and not _in_int64(usage.values()):
            return _CHECK_CLOSELY
    elif tag == "Command":
        if not _in_int64((obj.get("exitCode"),)):
            return _CHECK_CLOSELY
    elif tag == "ToolCall":
        # A huge number inside a free-form input or output is kept quoted, as its digits.
        try:
            for key in _FREE_FORM:
                value = obj.get(key)
                if type(value) is not str and _holds_big_number(value):
                    return _CHECK_CLOSELY
        except RecursionError:
            return _CHECK_CLOSELY
    at = obj.get("at")
    if at is not None:
        if type(at) not in (int, float) or not 0 <= at <= MAX_AT_MS:
            return _CHECK_CLOSELY
        stamp = int(at)
    try:
        data = _fields(tag, obj)
    except (ProtocolViolation, RecursionError):
        return _CHECK_CLOSELY
    # A total made of two counts can pass 64 bits: the careful path clamps it, with a note.
    usage = data if tag == "Usage" else data.get("usage") if tag == "Message" else None
    if usage is not None and not _in_int64(usage.values()):
        return _CHECK_CLOSELY
    return AgentEvent(tag, data, stamp, None, 8 * len(stripped))  # positional: quicker


def _holds_big_number(value: Any) -> bool:
    """Whether a parsed value holds a number outside signed 64 bits at any depth (orjson's
    float for an integer past 64 unsigned bits included)."""
    kind = type(value)
    if kind is int or kind is float:
        return not MIN_INT64 <= value <= MAX_INT64
    if kind is dict:
        value = value.values()
    elif kind is not list:
        return False
    for item in value:  # noqa: SIM110 (a plain loop: this runs for every tool call)
        if type(item) is not str and _holds_big_number(item):
            return True
    return False


def _in_int64(values: Any) -> bool:
    """Whether no number in ``values`` lies outside signed 64 bits (see _parse_plain on
    floats)."""
    for v in values:  # noqa: SIM110 (a plain loop: this runs for every line an agent prints)
        kind = type(v)
        if (kind is int or kind is float) and not MIN_INT64 <= v <= MAX_INT64:
            return False
    return True


def _parse_checked(stripped: str, stamp: int) -> AgentEvent | None:
    """Any line, read with every check: big numbers kept as digits, text cleaned, errors
    explained."""
    if len(stripped) > MAX_LINE_CHARS:
        tag = _named_tag(stripped)
        if tag is None:
            return None
        return _protocol_error(
            stripped, f"{tag}: the line is longer than {MAX_LINE_CHARS} characters", stamp
        )
    if _TRUNCATED.search(stripped[-100:]):
        tag = _named_tag(stripped)
        if tag is None:
            return None
        return _protocol_error(stripped, f"{tag}: the line is longer than the reader keeps", stamp)
    try:
        obj = json.loads(stripped, parse_int=_read_int)
    except RecursionError:
        if '"_tag"' not in stripped:
            return None
        tag = _named_tag(stripped) or "line"
        return _protocol_error(stripped, f"{tag}: the line nests JSON too deeply to read", stamp)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("_tag"), str):
        return None
    tag = obj["_tag"]
    if tag not in KNOWN_TAGS:
        return None
    try:
        data = _fields(tag, obj)
        at = obj.get("at")
        if at is not None:
            # Python's json reads NaN and Infinity, which int() cannot convert.
            if (
                isinstance(at, bool)
                or not isinstance(at, int | float | BigNumber)
                or (isinstance(at, float) and not math.isfinite(at))
                or (not isinstance(at, BigNumber) and at < 0)
            ):
                raise ProtocolViolation("field 'at' must be epoch milliseconds")
            if isinstance(at, BigNumber) or at > MAX_AT_MS:
                raise ProtocolViolation(
                    "field 'at' is out of range (epoch milliseconds up to the year 9999)"
                )
            stamp = int(at)
    except ProtocolViolation as exc:
        return _protocol_error(stripped, f"{tag}: {exc}", stamp)
    except RecursionError:
        return _protocol_error(stripped, f"{tag}: a value nests too deeply to keep", stamp)
    return AgentEvent(tag, cleaned_data(data), stamp)


def _named_tag(text: str) -> str | None:
    """The known tag a line that cannot be parsed whole seems to carry."""
    for tag in KNOWN_TAGS:
        if re.search(r'"_tag"\s*:\s*"' + tag + '"', text[:4000]):
            return tag
    return None


def _protocol_error(line: str, error: str, stamp: int) -> AgentEvent:
    return AgentEvent("ProtocolError", cleaned_data({"line": line[:4000], "error": error}), stamp)
