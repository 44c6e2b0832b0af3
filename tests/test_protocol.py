"""The command harness event protocol: which stdout lines become which events."""

from __future__ import annotations

import json

import pytest

from proctor.agent_events import AgentEvent
from proctor.protocol import KNOWN_TAGS, parse_line

NOW = 1_788_300_000_000


def parse(obj: dict) -> AgentEvent | None:
    return parse_line(json.dumps(obj), now_ms=NOW)


def error_of(obj: dict) -> str:
    event = parse(obj)
    assert event is not None and event.kind == "ProtocolError"
    return event.data["error"]


# --- each tag, valid ---


@pytest.mark.parametrize(
    ("line", "kind", "data"),
    [
        (
            {"_tag": "Started", "sessionId": "run-42", "model": "openai/gpt-5.5"},
            "Started",
            {"session_id": "run-42", "model": "openai/gpt-5.5"},
        ),
        ({"_tag": "Started", "sessionId": "s"}, "Started", {"session_id": "s", "model": None}),
        (
            {"_tag": "Started", "sessionId": "s", "model": None},
            "Started",
            {"session_id": "s", "model": None},
        ),
        (
            {"_tag": "Message", "role": "assistant", "text": "Reading the test."},
            "Message",
            {"role": "assistant", "text": "Reading the test.", "usage": None},
        ),
        (
            {"_tag": "Message", "text": "no role"},
            "Message",
            {"role": "assistant", "text": "no role", "usage": None},
        ),
        (
            {
                "_tag": "Message",
                "role": "user",
                "text": "go",
                "usage": {"inputTokens": 5, "outputTokens": 1, "cacheWriteTokens": 2},
            },
            "Message",
            {
                "role": "user",
                "text": "go",
                "usage": {
                    "input_tokens": 5,
                    "output_tokens": 1,
                    "cache_read_tokens": 0,
                    "cache_write_tokens": 2,
                    "total_tokens": 6,
                },
            },
        ),
        (
            {"_tag": "Command", "command": "bun test", "exitCode": 1, "output": "x\n"},
            "Command",
            {"command": "bun test", "exit_code": 1, "output": "x\n", "origin": "agent"},
        ),
        (
            {"_tag": "Command", "command": "make", "exitCode": None},
            "Command",
            {"command": "make", "exit_code": None, "output": "", "origin": "agent"},
        ),
        (
            {"_tag": "Command", "command": "make", "exitCode": 0, "output": None},
            "Command",
            {"command": "make", "exit_code": 0, "output": "", "origin": "agent"},
        ),
        (
            {"_tag": "FileChange", "paths": ["/workspace/src/total.ts"]},
            "FileChange",
            {"paths": ["/workspace/src/total.ts"]},
        ),
        ({"_tag": "FileChange", "paths": []}, "FileChange", {"paths": []}),
        (
            {
                "_tag": "ToolCall",
                "callId": "call_7",
                "name": "search",
                "input": '{"query":"total"}',
                "status": "completed",
            },
            "ToolCall",
            {
                "call_id": "call_7",
                "name": "search",
                "input": '{"query":"total"}',
                "output": None,
                "error": None,
                "status": "completed",
            },
        ),
        (
            {
                "_tag": "ToolCall",
                "callId": None,
                "name": "read",
                "input": "a.ts",
                "output": "text",
                "error": "partial",
                "status": None,
            },
            "ToolCall",
            {
                "call_id": None,
                "name": "read",
                "input": "a.ts",
                "output": "text",
                "error": "partial",
                "status": None,
            },
        ),
        (
            {"_tag": "Usage", "inputTokens": 9120, "outputTokens": 312, "cacheReadTokens": 8000},
            "Usage",
            {
                "input_tokens": 9120,
                "output_tokens": 312,
                "cache_read_tokens": 8000,
                "cache_write_tokens": 0,
                "total_tokens": 9432,
            },
        ),
        ({"_tag": "Finished", "reason": "done"}, "Finished", {"reason": "done"}),
    ],
)
def test_it_reads_each_known_tag_into_normalized_data(line, kind, data):
    event = parse(line)

    assert (event.kind, event.data) == (kind, data)


def test_every_known_tag_is_covered():
    assert set(KNOWN_TAGS) == {
        "Started",
        "Message",
        "Command",
        "FileChange",
        "ToolCall",
        "Usage",
        "Finished",
    }


# --- each kind of invalid line ---


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ({"_tag": "Started"}, "Started: missing field 'sessionId'"),
        ({"_tag": "Message", "role": "user"}, "Message: missing field 'text'"),
        ({"_tag": "Command", "exitCode": 0}, "Command: missing field 'command'"),
        (
            {"_tag": "Command", "command": "make"},
            "Command: missing field 'exitCode' (it may be null)",
        ),
        ({"_tag": "FileChange"}, "FileChange: field 'paths' must be a list of strings"),
        (
            {"_tag": "ToolCall", "name": "t", "input": "x", "status": None},
            "ToolCall: missing field 'callId' (it may be null)",
        ),
        (
            {"_tag": "ToolCall", "callId": None, "name": "t", "input": "x"},
            "ToolCall: missing field 'status' (it may be null)",
        ),
        (
            {"_tag": "ToolCall", "callId": None, "name": "t", "status": None},
            "ToolCall: missing field 'input'",
        ),
        (
            {"_tag": "ToolCall", "callId": None, "input": "x", "status": None},
            "ToolCall: missing field 'name'",
        ),
        ({"_tag": "Usage", "outputTokens": 1}, "Usage: missing field 'inputTokens'"),
        ({"_tag": "Usage", "inputTokens": 1}, "Usage: missing field 'outputTokens'"),
        ({"_tag": "Finished"}, "Finished: missing field 'reason'"),
    ],
)
def test_it_reports_a_missing_field(line, error):
    assert error_of(line) == error


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ({"_tag": "Started", "sessionId": 42}, "Started: field 'sessionId' must be a string"),
        (
            {"_tag": "Started", "sessionId": "s", "model": ["a"]},
            "Started: field 'model' must be a string",
        ),
        (
            {"_tag": "Message", "role": "system", "text": "x"},
            "Message: field 'role' must be 'assistant' or 'user'",
        ),
        ({"_tag": "Message", "text": 5}, "Message: field 'text' must be a string"),
        ({"_tag": "Message", "text": "x", "usage": 5}, "Message: field 'usage' must be an object"),
        ({"_tag": "Message", "text": "x", "usage": {}}, "Message: missing field 'inputTokens'"),
        (
            {"_tag": "Command", "command": "make", "exitCode": "1"},
            "Command: field 'exitCode' must be an integer or null",
        ),
        (
            {"_tag": "Command", "command": "make", "exitCode": False},
            "Command: field 'exitCode' must be an integer or null",
        ),
        (
            {"_tag": "Command", "command": "make", "exitCode": 0, "output": 3},
            "Command: field 'output' must be a string",
        ),
        (
            {"_tag": "FileChange", "paths": "/a"},
            "FileChange: field 'paths' must be a list of strings",
        ),
        (
            {"_tag": "FileChange", "paths": ["/a", None]},
            "FileChange: field 'paths' must be a list of strings",
        ),
        (
            {"_tag": "ToolCall", "callId": 7, "name": "t", "input": "x", "status": None},
            "ToolCall: field 'callId' must be a string",
        ),
        (
            {"_tag": "ToolCall", "callId": None, "name": None, "input": "x", "status": None},
            "ToolCall: field 'name' must be a string",
        ),
        (
            {"_tag": "ToolCall", "callId": None, "name": "t", "input": "x", "status": True},
            "ToolCall: field 'status' must be a string",
        ),
        (
            {"_tag": "Usage", "inputTokens": -1, "outputTokens": 0},
            "Usage: field 'inputTokens' must be a whole number, zero or more",
        ),
        (
            {"_tag": "Usage", "inputTokens": 1, "outputTokens": 1.5},
            "Usage: field 'outputTokens' must be a whole number, zero or more",
        ),
        (
            {"_tag": "Usage", "inputTokens": 1, "outputTokens": 1, "cacheReadTokens": True},
            "Usage: field 'cacheReadTokens' must be a whole number, zero or more",
        ),
        (
            {"_tag": "Usage", "inputTokens": 1, "outputTokens": 1, "cacheWriteTokens": "2"},
            "Usage: field 'cacheWriteTokens' must be a whole number, zero or more",
        ),
        (
            {"_tag": "Usage", "inputTokens": 1, "outputTokens": 1, "totalTokens": -2},
            "Usage: field 'totalTokens' must be a whole number, zero or more",
        ),
        ({"_tag": "Finished", "reason": None}, "Finished: field 'reason' must be a string"),
    ],
)
def test_it_reports_a_field_of_the_wrong_type(line, error):
    assert error_of(line) == error


@pytest.mark.parametrize(
    "line",
    [
        {"_tag": "Started", "sessionId": None},
        {"_tag": "Message", "text": None},
        {"_tag": "Command", "command": None, "exitCode": 0},
        {"_tag": "ToolCall", "callId": None, "name": None, "input": "x", "status": None},
        {"_tag": "Finished", "reason": None},
    ],
)
def test_it_refuses_null_where_the_protocol_does_not_allow_it(line):
    assert parse(line).kind == "ProtocolError"


def test_a_protocol_error_keeps_the_line_it_refused():
    line = '  {"_tag":"Finished"}  '

    event = parse_line(line, now_ms=NOW)

    assert event == AgentEvent(
        "ProtocolError",
        {"line": '{"_tag":"Finished"}', "error": "Finished: missing field 'reason'"},
        NOW,
    )


def test_a_protocol_error_keeps_at_most_4000_characters_of_the_line():
    event = parse({"_tag": "Finished", "reason": 1, "pad": "x" * 5000})

    assert len(event.data["line"]) == 4000


# --- lines that are not events ---


@pytest.mark.parametrize(
    "line",
    [
        "",
        "Compiling total.ts...",
        "{not json",
        '{"_tag":"Started","sessionId":"s"',
        '["_tag","Started"]',
        '"{\\"_tag\\":\\"Finished\\"}"',
        '{"_tag":"Thinking","text":"hmm"}',
        '{"_tag":["Finished"],"reason":"done"}',
        '{"sessionId":"s"}',
        '{"a":' + "[" * 100_000,
    ],
)
def test_it_ignores_a_line_that_is_not_an_event(line):
    assert parse_line(line, now_ms=NOW) is None


# --- at ---


def test_it_stamps_a_line_without_at_when_it_is_read():
    assert parse({"_tag": "Finished", "reason": "done"}).at_ms == NOW


def test_it_keeps_the_time_a_line_carries():
    assert parse({"_tag": "Finished", "reason": "done", "at": 1788300005000}).at_ms == 1788300005000


def test_it_truncates_a_fractional_at_to_whole_milliseconds():
    assert parse({"_tag": "Finished", "reason": "done", "at": 1788300005000.7}).at_ms == (
        1788300005000
    )


def test_a_null_at_counts_as_missing():
    assert parse({"_tag": "Finished", "reason": "done", "at": None}).at_ms == NOW


def test_it_stamps_with_the_clock_when_no_time_is_given():
    event = parse_line('{"_tag":"Finished","reason":"done"}')

    # Epoch milliseconds, not seconds: later than 2020-01-01 in ms.
    assert event.at_ms > 1_577_836_800_000


@pytest.mark.parametrize("at", ["-1", '"1788300005000"', "true", "NaN", "Infinity", "[1]"])
def test_it_refuses_an_at_that_is_not_epoch_milliseconds(at):
    event = parse_line('{"_tag":"Finished","reason":"done","at":' + at + "}", now_ms=NOW)

    assert event.kind == "ProtocolError"
    assert event.data["error"] == "Finished: field 'at' must be epoch milliseconds"
    assert event.at_ms == NOW


# --- totalTokens and tool values ---


def test_total_tokens_defaults_to_input_plus_output():
    event = parse({"_tag": "Usage", "inputTokens": 10, "outputTokens": 5, "cacheReadTokens": 99})

    assert event.data["total_tokens"] == 15


def test_total_tokens_keeps_an_explicit_count():
    event = parse({"_tag": "Usage", "inputTokens": 10, "outputTokens": 5, "totalTokens": 40})

    assert event.data["total_tokens"] == 40


def test_a_null_total_tokens_falls_back_to_input_plus_output():
    event = parse({"_tag": "Usage", "inputTokens": 10, "outputTokens": 5, "totalTokens": None})

    assert event.data["total_tokens"] == 15


def test_it_keeps_tool_values_that_are_not_strings_as_json_text():
    event = parse(
        {
            "_tag": "ToolCall",
            "callId": None,
            "name": "search",
            "input": {"query": "größe"},
            "output": ["total.ts", 3],
            "error": {"code": 2},
            "status": None,
        }
    )

    assert event.data["input"] == '{"query": "größe"}'
    assert event.data["output"] == '["total.ts", 3]'
    assert event.data["error"] == '{"code": 2}'


def test_an_event_serializes_with_its_kind_and_time():
    event = parse({"_tag": "Finished", "reason": "done", "at": 5})

    assert event.to_json() == {"kind": "Finished", "at": 5, "reason": "done"}
