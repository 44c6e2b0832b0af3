"""Folding an agent CLI's own telemetry into a turn: the events are sent by the OpenTelemetry
SDK's OTLP exporter to a trial's receiver, read back, and what the turn's stream lacked is
added, marked ``source: "otlp"``; what the stream already reported is never counted twice."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry._logs import LogRecord
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource

from proctor.agent_events import AgentEvent
from runner.core.transcript import Transcript
from runner.harnesses.agent_telemetry import folded_events, read_turn
from runner.mocks import start_mocks, stop_mocks, trial_telemetry
from runner.sandboxes.local import LocalSandbox

CLAUDE_REQUEST = {
    "event.name": "api_request",
    "model": "claude-fake-1",
    "input_tokens": "100",  # Claude Code sends its counts as strings
    "output_tokens": "15",
    "cache_read_tokens": "20",
    "cache_creation_tokens": "10",
    "cost_usd": 0.0125,
    "duration_ms": "40",
}
CLAUDE_ERROR = {
    "event.name": "api_error",
    "model": "claude-fake-1",
    "error": "Overloaded",
    "status_code": "529",
    "attempt": "2",
    "duration_ms": "1200",
}
CLAUDE_TOOL = {
    "event.name": "tool_result",
    "tool_name": "Bash",
    "success": "true",
    "duration_ms": "7",
}
CODEX_COMPLETED = {
    "event.name": "codex.sse_event",
    "event.kind": "response.completed",
    "input_token_count": "120",
    "output_token_count": "30",
    "cached_token_count": "20",
}
CODEX_COST = {"event.name": "codex.turn_cost", "usage.estimated_usd": 0.004}


@pytest.fixture
def telemetry_of():
    """Sends events (body, attributes) through the SDK's OTLP/HTTP log exporter to a trial's
    receiver and returns what the receiver holds."""
    boxes = []

    def send(service: str, *events: tuple[str, dict[str, Any]]):
        box = LocalSandbox()
        boxes.append(box)
        started = start_mocks([], box, otlp_receiver=True)
        assert started is not None
        provider = LoggerProvider(resource=Resource.create({"service.name": service}))
        provider.add_log_record_processor(
            SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"{started.access.otlp_url}/v1/logs"))
        )
        logger = provider.get_logger(service)
        for body, attributes in events:
            logger.emit(LogRecord(body=body, attributes=attributes))
        provider.shutdown()
        receiver = trial_telemetry(box)
        assert receiver is not None
        return receiver.exports()

    yield send
    for box in boxes:
        stop_mocks(box)
        box.destroy()


def fold(turn, exports) -> list[AgentEvent]:
    events = folded_events(read_turn(exports), turn)
    for event in events:
        turn.add(event)
    return events


def test_a_turn_whose_stream_reported_nothing_gets_the_telemetrys_usage_and_cost(telemetry_of):
    # A turn cut off before Claude Code printed its result line: no usage on the stream.
    exports = telemetry_of(
        "claude-code",
        ("claude_code.api_request", CLAUDE_REQUEST),
        ("claude_code.api_error", CLAUDE_ERROR),
        ("claude_code.tool_result", CLAUDE_TOOL),
        ("claude_code.api_request", CLAUDE_REQUEST),
    )
    transcript = Transcript()
    turn = transcript.start_turn("go")
    events = fold(turn, exports)

    usage = next(e.data for e in events if e.kind == "Usage")
    assert usage == {
        "input_tokens": 260,  # input counts the cached tokens too, as the stream parser does
        "output_tokens": 30,
        "cache_read_tokens": 40,
        "cache_write_tokens": 20,
        "total_tokens": 290,
        "cost_usd": 0.025,
        "source": "otlp",
    }
    assert transcript.usage()["input_tokens"] == 260 and transcript.cost_usd() == 0.025
    tool = next(e.data for e in events if e.kind == "ToolCall")
    assert (tool["name"], tool["status"], tool["source"]) == ("Bash", "success", "otlp")
    logs = [e.data["text"] for e in events if e.kind == "Log"]
    assert logs == [
        "model API error: 529 Overloaded (claude-fake-1, attempt 2, 1200 ms)",
        "telemetry: 2 model requests, 80 ms; tools: Bash 1× 7 ms",
    ]
    assert all(e.data["source"] == "otlp" for e in events)


def test_what_the_stream_reported_is_not_counted_again(telemetry_of):
    exports = telemetry_of(
        "claude-code",
        ("claude_code.api_request", CLAUDE_REQUEST),
        ("claude_code.tool_result", CLAUDE_TOOL),
    )
    transcript = Transcript()
    turn = transcript.start_turn("go")
    turn.add(AgentEvent("Command", {"command": "echo hi", "exit_code": 0, "output": "hi"}))
    turn.add(
        AgentEvent(
            "Usage",
            {
                "input_tokens": 130,
                "output_tokens": 15,
                "cache_read_tokens": 20,
                "cache_write_tokens": 10,
                "total_tokens": 145,
                "cost_usd": 0.0125,
            },
        )
    )
    events = fold(turn, exports)

    assert [e.kind for e in events] == ["Log"]  # only the durations, which no stream reports
    assert transcript.usage()["input_tokens"] == 130 and transcript.cost_usd() == 0.0125


def test_codex_gets_the_cost_its_stream_lacks_and_keeps_its_own_tokens(telemetry_of):
    exports = telemetry_of(
        "codex_exec", ("codex.sse_event", CODEX_COMPLETED), ("codex.turn_cost", CODEX_COST)
    )
    transcript = Transcript()
    turn = transcript.start_turn("go")
    turn.add(
        AgentEvent(
            "Usage",
            {
                "input_tokens": 120,
                "output_tokens": 30,
                "cache_read_tokens": 20,
                "cache_write_tokens": 0,
                "total_tokens": 150,
            },
        )
    )
    events = fold(turn, exports)

    assert [e.data for e in events if e.kind == "Usage"] == [
        {
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
            "total_tokens": 0,
            "cost_usd": 0.004,
            "source": "otlp",
        }
    ]
    assert transcript.usage()["input_tokens"] == 120 and transcript.cost_usd() == 0.004


def test_folded_cost_keeps_usage_the_stream_gave_on_its_messages(telemetry_of):
    # A harness that reports usage on its messages only: a folded Usage event must not make
    # the turn forget it (a Usage line from the stream itself would replace it).
    exports = telemetry_of("codex_exec", ("codex.turn_cost", CODEX_COST))
    transcript = Transcript()
    turn = transcript.start_turn("go")
    turn.add(
        AgentEvent(
            "Message",
            {
                "role": "assistant",
                "text": "done",
                "usage": {"input_tokens": 50, "output_tokens": 5},
            },
        )
    )
    fold(turn, exports)

    assert transcript.usage()["input_tokens"] == 50 and transcript.cost_usd() == 0.004


def test_codex_tokens_fill_a_turn_its_stream_left_without_usage(telemetry_of):
    exports = telemetry_of("codex_exec", ("codex.sse_event", CODEX_COMPLETED))
    transcript = Transcript()
    events = fold(transcript.start_turn("go"), exports)

    assert [e.data for e in events if e.kind == "Usage"] == [
        {
            "input_tokens": 120,
            "output_tokens": 30,
            "cache_read_tokens": 20,
            "cache_write_tokens": 0,
            "total_tokens": 150,
            "source": "otlp",
        }
    ]
