"""What an agent CLI's own OpenTelemetry says a turn did, and the events it adds to the turn
where the CLI's output stream left something out.

The CLI sends its logs (events), metrics and traces to the trial's receiver
(``runner.mocks.otlp_receiver``) while it runs and flushes them as it exits, so when a turn's
process has ended, what arrived since the previous turn is that turn's. Only the log events
are read here (one record per model request, error and tool result, so nothing is counted
twice the way cumulative or delta metrics could be); metrics and traces are kept raw.

The events read, by CLI (names without their ``claude_code.``/``codex.``/``gemini_cli.``
prefix):

- Claude Code: ``api_request`` (tokens, ``cost_usd``, ``duration_ms``), ``api_error``,
  ``tool_result``;
- Codex: ``sse_event`` of kind ``response.completed`` with token counts, ``api_request``
  (``duration_ms``, an error status), ``tool_result``; a ``turn_cost`` with
  ``usage.estimated_usd`` when Codex sends one (it sends none for an API-key provider);
- Gemini CLI: ``api_response``, ``api_error``, ``tool_call``.

Folded events carry ``source: "otlp"``. Never counted twice: tokens are folded only into a
turn whose stream reported none, cost only into one whose stream reported none, tool calls
only into one whose stream reported no tool call or command; API errors and the turn's
request and tool durations, which no stream reports, are always added, as log lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from proctor.agent_events import AgentEvent
from runner.core.transcript import USAGE_KEYS, TurnTranscript
from runner.mocks.otlp_receiver import OtlpExport, plain_attributes

SOURCE = "otlp"
PREFIXES = ("claude_code.", "codex.", "gemini_cli.")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _count(value: Any) -> int:
    number = _number(value)
    return int(number) if number is not None and number > 0 else 0


def _truthy(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


@dataclass(frozen=True)
class TelemetryEvent:
    """One log record of the CLI's: its event name (prefix removed) and attributes."""

    name: str
    attributes: dict[str, Any]


def telemetry_events(exports: Iterable[OtlpExport]) -> Iterator[TelemetryEvent]:
    """The log records of ``exports``, in the order they arrived."""
    for export in exports:
        if export.signal != "logs":
            continue
        for resource in export.payload.get("resourceLogs") or []:
            for scope in resource.get("scopeLogs") or []:
                for record in scope.get("logRecords") or []:
                    attributes = plain_attributes(record.get("attributes") or [])
                    body = (record.get("body") or {}).get("stringValue")
                    # The attribute first: Codex's ``eventName`` is its source line.
                    name = attributes.get("event.name") or record.get("eventName") or body or ""
                    if not isinstance(name, str):
                        continue
                    for prefix in PREFIXES:
                        name = name.removeprefix(prefix)
                    yield TelemetryEvent(name, attributes)


@dataclass
class TurnTelemetry:
    """What the CLI's telemetry says of one turn."""

    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_KEYS, 0))
    usage_seen: bool = False
    cost_usd: float | None = None
    requests: int = 0
    request_ms: int = 0
    errors: list[str] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)

    def add_usage(self, **counts: int) -> None:
        self.usage_seen = True
        for key, count in counts.items():
            self.usage[key] += count

    def add_cost(self, value: Any) -> None:
        cost = _number(value)
        if cost is not None and cost >= 0:
            self.cost_usd = (self.cost_usd or 0.0) + cost

    def add_request(self, attributes: dict[str, Any]) -> None:
        self.requests += 1
        self.request_ms += _count(attributes.get("duration_ms"))

    def add_error(self, attributes: dict[str, Any]) -> None:
        status = attributes.get("status_code") or attributes.get("http.response.status_code")
        error = attributes.get("error") or attributes.get("error.message") or "error"
        details = [
            str(part)
            for part in (
                attributes.get("model"),
                f"attempt {attributes['attempt']}" if attributes.get("attempt") else None,
                f"{_count(attributes.get('duration_ms'))} ms"
                if attributes.get("duration_ms")
                else None,
            )
            if part
        ]
        prefix = f"{status} " if status not in (None, "", "undefined") else ""
        suffix = f" ({', '.join(details)})" if details else ""
        self.errors.append(f"model API error: {prefix}{error}{suffix}")

    def add_tool(self, name: Any, attributes: dict[str, Any]) -> None:
        success = _truthy(attributes.get("success"))
        self.tools.append(
            {
                "name": str(name or "tool"),
                "call_id": attributes.get("call_id") or attributes.get("tool_use_id"),
                "duration_ms": _count(attributes.get("duration_ms")),
                "success": success,
                "error": attributes.get("error") if success is False else None,
            }
        )


def read_turn(exports: Iterable[OtlpExport]) -> TurnTelemetry:
    """The usage, cost, requests, errors and tool results in ``exports``' log events."""
    turn = TurnTelemetry()
    for event in telemetry_events(exports):
        a = event.attributes
        if event.name == "api_request" and "input_tokens" in a:  # Claude Code
            cache_read, cache_write = (
                _count(a.get("cache_read_tokens")),
                _count(a.get("cache_creation_tokens")),
            )
            # Proctor's input counts cached tokens too (as the stream parser does).
            turn.add_usage(
                input_tokens=_count(a.get("input_tokens")) + cache_read + cache_write,
                output_tokens=_count(a.get("output_tokens")),
                cache_read_tokens=cache_read,
                cache_write_tokens=cache_write,
            )
            turn.add_cost(a.get("cost_usd"))
            turn.add_request(a)
        elif event.name == "api_request":  # Codex: one per HTTP request, tokens come apart
            status = _count(a.get("http.response.status_code"))
            if a.get("error.message") or status >= 400:
                turn.add_error(a)
            else:
                turn.add_request(a)
        elif event.name == "sse_event" and "input_token_count" in a:  # Codex
            turn.add_usage(
                input_tokens=_count(a.get("input_token_count")),
                output_tokens=_count(a.get("output_token_count")),
                cache_read_tokens=_count(a.get("cached_token_count")),
                cache_write_tokens=_count(a.get("cache_write_token_count")),
            )
        elif event.name == "turn_cost":  # Codex, when it prices the model
            turn.add_cost(a.get("usage.estimated_usd"))
        elif event.name == "api_response":  # Gemini CLI
            cached = _count(a.get("cached_content_token_count"))
            turn.add_usage(
                input_tokens=_count(a.get("input_token_count")),
                output_tokens=_count(a.get("output_token_count")),
                cache_read_tokens=cached,
            )
            turn.add_request(a)
        elif event.name == "api_error":  # Claude Code, Gemini CLI
            turn.add_error(a)
        elif event.name == "tool_result":  # Claude Code, Codex
            turn.add_tool(a.get("tool_name"), a)
        elif event.name == "tool_call":  # Gemini CLI
            turn.add_tool(a.get("function_name"), a)
    return turn


def _stream_reported_usage(turn: TurnTranscript) -> bool:
    return any(turn.usage[key] for key in USAGE_KEYS)


def folded_events(telemetry: TurnTelemetry, turn: TurnTranscript) -> list[AgentEvent]:
    """The events ``telemetry`` adds to ``turn`` (read from the CLI's stream so far): what
    the stream lacked, each marked ``source: "otlp"``."""
    events: list[AgentEvent] = []
    usage: dict[str, Any] = {}
    if telemetry.usage_seen and not _stream_reported_usage(turn):
        usage.update(telemetry.usage)
    if telemetry.cost_usd is not None and turn.cost_usd is None:
        usage["cost_usd"] = telemetry.cost_usd
    if usage:
        counts = {key: int(usage.get(key, 0)) for key in USAGE_KEYS}
        counts["total_tokens"] = counts["input_tokens"] + counts["output_tokens"]
        cost = {"cost_usd": usage["cost_usd"]} if "cost_usd" in usage else {}
        events.append(AgentEvent("Usage", {**counts, **cost, "source": SOURCE}))
    if telemetry.tools and not turn.tool_calls and not turn.commands:
        for tool in telemetry.tools:
            status = {True: "success", False: "failed", None: None}[tool["success"]]
            events.append(
                AgentEvent(
                    "ToolCall",
                    {
                        "call_id": tool["call_id"],
                        "name": tool["name"],
                        "input": "",
                        "output": None,
                        "error": tool["error"],
                        "status": status,
                        "source": SOURCE,
                    },
                )
            )
    for error in telemetry.errors:
        events.append(AgentEvent("Log", {"stream": SOURCE, "text": error, "source": SOURCE}))
    summary = _durations(telemetry)
    if summary:
        events.append(AgentEvent("Log", {"stream": SOURCE, "text": summary, "source": SOURCE}))
    return events


def _durations(telemetry: TurnTelemetry) -> str:
    """One line with the turn's model requests and tool runs and the time they took."""
    parts = []
    if telemetry.requests:
        plural = "s" if telemetry.requests != 1 else ""
        parts.append(f"{telemetry.requests} model request{plural}, {telemetry.request_ms} ms")
    if telemetry.tools:
        by_name: dict[str, list[int]] = {}
        for tool in telemetry.tools:
            by_name.setdefault(tool["name"], []).append(tool["duration_ms"])
        parts.append(
            "tools: "
            + ", ".join(f"{name} {len(times)}× {sum(times)} ms" for name, times in by_name.items())
        )
    return "telemetry: " + "; ".join(parts) if parts else ""
