"""The calls a trial's mocks received, as checks read them: ``ctx.mocks["billing"]``.

One ``MockCall`` per request (api), run (cli) or tool call (mcp), in the order they arrived.
``MockLog`` answers the questions a grader asks: was it called, how often, with what::

    ctx.mocks["billing"].called("POST", "/refunds", json={"order_id": 42})
    ctx.mocks["gh"].count("pr", "create")
    ctx.mocks["tickets"].last("create_ticket").arguments["title"]

Patterns: for an api, ``(METHOD, path)`` where the path may hold ``{param}`` or ``*``; for a
cli, the leading arguments (shell wildcards allowed); for an mcp, the tool's name.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class MockCall:
    """One call. ``method``/``path`` read naturally per kind: an HTTP method and path (api),
    the command and its arguments joined (cli), ``TOOL`` and the tool's name (mcp)."""

    mock: str
    kind: str  # api | cli | mcp
    seq: int
    at: float  # seconds since the epoch
    method: str
    path: str
    status: int | None = None  # HTTP status (api, mcp), exit code (cli)
    duration_ms: int = 0
    query: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)  # secrets redacted
    body: Any = None  # the request's JSON (or text), or the tool's arguments
    response: Any = None  # what the mock answered: JSON, text, a tool result, stdout
    argv: list[str] = field(default_factory=list)  # cli
    stdin: str = ""  # cli
    cwd: str = ""  # cli
    env_names: list[str] = field(default_factory=list)  # cli: names only, never values
    stderr: str = ""  # cli
    error: str = ""  # the handler failed or the route was unknown

    @property
    def json(self) -> Any:
        """The request body (api) or the tool's arguments (mcp)."""
        return self.body

    @property
    def arguments(self) -> dict[str, Any]:
        """An mcp tool call's arguments."""
        return self.body if isinstance(self.body, dict) else {}

    @property
    def args(self) -> list[str]:
        """A cli call's arguments (the command's name left out)."""
        return self.argv[1:]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> MockCall:
        return cls(**{k: value[k] for k in cls.__dataclass_fields__ if k in value})

    def summary(self) -> str:
        """One line a person (or a judge) reads: ``POST /refunds {"order_id": 42} -> 201``."""
        if self.kind == "cli":
            head = " ".join(self.argv) or self.path
            tail = f" -> exit {self.status}"
        elif self.kind == "mcp":
            head = f"{self.path}({_short(self.body)})"
            tail = f" -> {_short(self.response)}" + (" (error)" if self.error else "")
        else:
            head = f"{self.method} {self.path}" + (f" {_short(self.body)}" if self.body else "")
            tail = f" -> {self.status}"
        return head + tail


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _path_pattern(pattern: str) -> re.Pattern[str]:
    """``/orders/{id}`` and ``/orders/*`` match ``/orders/42``."""
    parts = re.split(r"(\{[^/}]+\}|\*)", pattern)
    regex = "".join(
        "[^/]+" if p.startswith("{") else ".*" if p == "*" else re.escape(p) for p in parts
    )
    return re.compile(f"^{regex}/?$")


def _contains(actual: Any, expected: Any) -> bool:
    """``expected`` is found in ``actual``: dict keys compared recursively, the rest equal."""
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            k in actual and _contains(actual[k], v) for k, v in expected.items()
        )
    return actual == expected


class MockLog:
    """One mock's calls, with the helpers checks use. ``calls`` is the full list."""

    def __init__(self, name: str, kind: str, calls: Iterable[MockCall] = ()) -> None:
        self.name = name
        self.kind = kind
        self.calls: list[MockCall] = list(calls)

    def __repr__(self) -> str:
        return f"<MockLog {self.name} ({self.kind}): {len(self.calls)} call(s)>"

    def __len__(self) -> int:
        return len(self.calls)

    def __iter__(self):
        return iter(self.calls)

    def matching(self, *pattern: str, json: Any = None) -> list[MockCall]:
        """The calls matching ``pattern`` (see the module's docstring) and, when given, whose
        body or arguments contain ``json``. No pattern: every call."""
        found = [call for call in self.calls if self._matches(call, pattern)]
        if json is not None:
            found = [call for call in found if _contains(call.body, json)]
        return found

    def called(self, *pattern: str, json: Any = None) -> bool:
        return bool(self.matching(*pattern, json=json))

    def count(self, *pattern: str, json: Any = None) -> int:
        return len(self.matching(*pattern, json=json))

    def last(self, *pattern: str, json: Any = None) -> MockCall | None:
        found = self.matching(*pattern, json=json)
        return found[-1] if found else None

    def first(self, *pattern: str, json: Any = None) -> MockCall | None:
        found = self.matching(*pattern, json=json)
        return found[0] if found else None

    def _matches(self, call: MockCall, pattern: tuple[str, ...]) -> bool:
        if not pattern:
            return True
        if self.kind == "api":
            if len(pattern) == 1:
                method, path = (
                    (pattern[0].split(" ", 1) + ["*"])[:2]
                    if " " in pattern[0]
                    else ("*", pattern[0])
                )
            else:
                method, path = pattern[0], pattern[1]
            method_ok = method == "*" or method.upper() == call.method.upper()
            return method_ok and bool(_path_pattern(path).match(call.path))
        if self.kind == "cli":
            words = [w for p in pattern for w in p.split()]
            args = call.args
            return len(args) >= len(words) and all(
                fnmatch.fnmatchcase(arg, word) for arg, word in zip(args, words, strict=False)
            )
        return fnmatch.fnmatchcase(call.path, pattern[0])

    def summary(self, limit: int = 50) -> str:
        """The calls as numbered lines, for a judge's evidence and the run log."""
        if not self.calls:
            return f"{self.name} ({self.kind}): no calls"
        lines = [f"{self.name} ({self.kind}): {len(self.calls)} call(s)"]
        lines += [f"  {i}. {c.summary()}" for i, c in enumerate(self.calls[:limit], start=1)]
        if len(self.calls) > limit:
            lines.append(f"  … {len(self.calls) - limit} more")
        return "\n".join(lines)


def call_assertion_verdict(kind: str, value: Any, mocks: Mapping[str, MockLog]) -> tuple[bool, str]:
    """The verdict of a ``called``, ``not-called`` or ``call-count`` assertion: value names the
    mock then the call pattern (``"billing POST /refunds"``)."""
    spec = value.get("call", "") if isinstance(value, Mapping) else str(value)
    name, *pattern = spec.split()
    log = mocks.get(name)
    if log is None:
        return False, f"no mock named {name!r} ran in this trial"
    if log.kind == "api" and len(pattern) >= 2:
        pattern = [pattern[0], " ".join(pattern[1:])]
    where = value.get("json") if isinstance(value, Mapping) else None
    found = log.count(*pattern, json=where)
    shown = " ".join(pattern) or "any call"
    if kind == "called":
        return found > 0, f"{name}: {shown} called {found} time(s)"
    if kind == "not-called":
        return found == 0, f"{name}: {shown} called {found} time(s) (expected none)"
    bounds = value if isinstance(value, Mapping) else {}
    low = bounds.get("min", bounds.get("count", 0))
    high = bounds.get("max", bounds.get("count"))
    passed = found >= low and (high is None or found <= high)
    wanted = (
        f"exactly {low}" if "count" in bounds else f"{low} to {high if high is not None else 'any'}"
    )
    return passed, f"{name}: {shown} called {found} time(s) (expected {wanted})"
