"""The command harness event protocol: one JSON object per stdout line, tagged by ``_tag``.

Shared by the runner (which parses what an agent process prints) and the runner kit (which
refuses to print what the runner would refuse), so both apply one set of rules.

A line with a known tag is checked field by field and becomes an :class:`AgentEvent` with
snake_case data; a known tag with wrong fields becomes a ``ProtocolError`` event (never accepted
silently); any other line is not an event (ordinary logging) and stays only in the raw log.

Normalized ``data`` per kind, as stored in ``Event.data`` and ``events.jsonl``:

- Started: ``session_id`` (str), ``model`` (str | None)
- Message: ``role`` ("assistant" | "user"), ``text`` (str), ``usage`` (Usage data | None)
- Command: ``command`` (str), ``exit_code`` (int | None), ``output`` (str),
  ``origin`` ("agent": printed by the process | "trace": seen by the shell recorder)
- FileChange: ``paths`` (list[str])
- ToolCall: ``call_id`` (str | None), ``name`` (str), ``input`` (str), ``output`` (str | None),
  ``error`` (str | None), ``status`` (str | None)
- Usage: ``input_tokens``, ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens``,
  ``total_tokens`` (ints >= 0)
- Finished: ``reason`` (str)
- ProtocolError: ``line`` (str), ``error`` (str)
- Log: ``stream`` (str), ``text`` (str): infrastructure notes such as prepare's output
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

KNOWN_TAGS = ("Started", "Message", "Command", "FileChange", "ToolCall", "Usage", "Finished")


@dataclass
class AgentEvent:
    kind: str
    data: dict[str, Any]
    at_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "at": self.at_ms, **self.data}


class ProtocolViolation(ValueError):
    """A line with a known tag whose fields break the protocol."""


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
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProtocolViolation(f"field {key!r} must be a whole number, zero or more")
    return value


def _as_text(value: Any) -> str:
    """A tool input or output that is not a string is kept as JSON, as the kit writes it."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _usage(obj: dict) -> dict[str, int]:
    usage = {
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
    return usage


def _fields(tag: str, obj: dict) -> dict[str, Any]:
    if tag == "Started":
        return {
            "session_id": _text(obj, "sessionId"),
            "model": _text(obj, "model", required=False, nullable=True),
        }
    if tag == "Message":
        role = _text(obj, "role", required=False) or "assistant"
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


def parse_line(line: str, *, now_ms: int | None = None) -> AgentEvent | None:
    """The event a stdout line carries, a ProtocolError event, or None for a non-event line."""
    stripped = line.strip()
    if not stripped.startswith("{"):
        return None
    try:
        obj = json.loads(stripped)
    except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
        return None
    if not isinstance(obj, dict) or obj.get("_tag") not in KNOWN_TAGS:
        return None
    tag = obj["_tag"]
    stamp = now_ms if now_ms is not None else int(time.time() * 1000)
    try:
        data = _fields(tag, obj)
        at = obj.get("at")
        if at is not None:
            # Python's json reads NaN and Infinity, which int() cannot convert.
            if (
                isinstance(at, bool)
                or not isinstance(at, int | float)
                or not math.isfinite(at)
                or at < 0
            ):
                raise ProtocolViolation("field 'at' must be epoch milliseconds")
            stamp = int(at)
    except ProtocolViolation as exc:
        return AgentEvent(
            "ProtocolError", {"line": stripped[:4000], "error": f"{tag}: {exc}"}, stamp
        )
    return AgentEvent(tag, data, stamp)
