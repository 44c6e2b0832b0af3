"""The shortcuts the ingest path takes give what the careful paths give.

A well-formed protocol line is read by a fast path (one ``json.loads`` and the field checks);
any line must come out as the careful reader makes it. A flat event already storable is kept
as it is; the careful copy must equal it. A long text is scanned for ``token: value`` shapes
only where one could match; a credential anywhere in it must still be hidden.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.protocol import (
    KNOWN_TAGS,
    MAX_AT_MS,
    MAX_INT64,
    AgentEvent,
    _parse_checked,
    parse_line,
    storable_event,
)
from runner.core.recording import MemoryRecorder, RedactingRecorder
from runner.core.redaction import REDACTED, Redactor

FIELDS = [
    "_tag", "role", "text", "usage", "command", "exitCode", "output", "paths", "callId",
    "name", "input", "status", "error", "inputTokens", "outputTokens", "cacheReadTokens",
    "totalTokens", "costUsd", "reason", "sessionId", "model", "at",
]  # fmt: skip
numbers = st.one_of(
    st.integers(min_value=-(2**66), max_value=2**66),
    st.sampled_from([MAX_INT64, MAX_INT64 + 1, MAX_AT_MS, MAX_AT_MS + 1, 10**30, -1, 0]),
    st.floats(allow_nan=True, allow_infinity=True),
)
texts = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["assistant", "user", "done", "ls -la", "é", "\x00", "\ud800"]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(st.sampled_from(FIELDS), scalars, max_size=4),
)


WELL_FORMED = [
    {"_tag": "Started", "sessionId": "s1", "model": None},
    {"_tag": "Message", "role": "assistant", "text": "hi", "usage": {"inputTokens": 3, "outputTokens": 4}},
    {"_tag": "Command", "command": "ls", "exitCode": 0, "output": "a"},
    {"_tag": "ToolCall", "callId": "c", "name": "read", "input": {"n": 1}, "status": None},
    {"_tag": "Usage", "inputTokens": 1, "outputTokens": 2, "costUsd": 0.5},
    {"_tag": "FileChange", "paths": ["a"]},
    {"_tag": "Finished", "reason": "done"},
]  # fmt: skip


@st.composite
def protocol_lines(draw) -> str:
    if draw(st.booleans()):  # a well-formed event with one field changed (or none)
        obj = dict(draw(st.sampled_from(WELL_FORMED)))
        if draw(st.booleans()):
            obj[draw(st.sampled_from([*obj, "at"]))] = draw(values)
    else:
        obj = draw(st.dictionaries(st.sampled_from(FIELDS), values, max_size=7))
        obj["_tag"] = draw(st.one_of(st.sampled_from(KNOWN_TAGS), texts))
    line = json.dumps(obj, ensure_ascii=draw(st.booleans()))
    return draw(st.sampled_from([line, line.replace(", ", ","), " " + line + " "]))


def as_stored(event: AgentEvent | None):
    return None if event is None else (event.kind, event.data, event.at_ms)


@settings(max_examples=2_000, deadline=None)
@given(protocol_lines())
def test_any_line_reads_as_the_careful_reader_reads_it(line):
    assert as_stored(parse_line(line, now_ms=5)) == as_stored(_parse_checked(line.strip(), 5))


def test_well_formed_lines_of_every_kind_become_their_events():
    lines = [
        '{"_tag":"Started","sessionId":"s1","model":null}',
        '{"_tag":"Message","text":"hi","usage":{"inputTokens":3,"outputTokens":4}}',
        '{"_tag":"Command","command":"ls","exitCode":0,"output":"a","at":1700000000000}',
        '{"_tag":"ToolCall","callId":"c","name":"read","input":{"path":"a.py"},"status":null}',
        '{"_tag":"Usage","inputTokens":1,"outputTokens":2,"costUsd":0.5}',
        '{"_tag":"FileChange","paths":["a","b"]}',
        '{"_tag":"Finished","reason":"done"}',
    ]
    events = [parse_line(line, now_ms=7) for line in lines]

    assert [e.kind for e in events] == list(KNOWN_TAGS[:1]) + [
        "Message", "Command", "ToolCall", "Usage", "FileChange", "Finished",
    ]  # fmt: skip
    assert events[1].data["usage"]["total_tokens"] == 7
    assert events[2].at_ms == 1_700_000_000_000
    assert events[3].data["input"] == '{"path": "a.py"}'
    assert events[4].data["cost_usd"] == 0.5


def test_a_bad_line_still_says_what_is_wrong():
    event = parse_line('{"_tag":"Command","command":"ls","exitCode":99999999999999999999}')

    assert event.kind == "ProtocolError"
    assert event.data["error"] == (
        "Command: field 'exitCode' is outside the signed 64-bit integer range"
    )


flat_data = st.dictionaries(
    st.text(max_size=60),
    st.one_of(
        scalars,
        st.lists(texts, max_size=3),
        st.dictionaries(st.text(max_size=4), st.one_of(numbers, texts), max_size=2),
    ),
    max_size=4,
)


@settings(max_examples=1_000, deadline=None)
@given(flat_data, st.one_of(st.integers(min_value=-5, max_value=MAX_AT_MS + 5)))
def test_a_flat_event_kept_as_it_is_equals_its_careful_copy(data, at):
    event = AgentEvent("Log", data, at)
    kept = storable_event(event, max_field_bytes=40)
    if kept is event:  # the shortcut: the careful copy must be the same
        careful = storable_event(AgentEvent("Log", {**data, "notes": []}, at), max_field_bytes=40)
        careful.data.pop("notes", None)
        assert careful.data == data and careful.at_ms == at
    assert all(len(t.encode("utf-8", "surrogatepass")) <= 200 for t in kept.data)


def test_a_credential_deep_in_a_long_conversation_is_hidden():
    entries = [{"command": f"grep -n todo src/{i}.py", "output": "3: # todo"} for i in range(5000)]
    entries.insert(2500, {"command": "env", "output": "DEPLOY_TOKEN=abcd1234efgh5678"})
    text = json.dumps({"usage": {"input_tokens": 10}, "commands": entries}, indent=2)

    redacted = Redactor().redact(text)

    assert "abcd1234efgh5678" not in redacted
    assert f"DEPLOY_TOKEN={REDACTED}" in redacted
    assert redacted.count("grep -n todo") == 5000


def test_a_conversation_without_credentials_is_left_as_it_is():
    entries = [{"text": f"step {i}", "usage": {"input_tokens": 123456789}} for i in range(3000)]
    text = json.dumps({"turns": entries}, indent=2)

    assert Redactor().redact(text) is text


def test_only_the_strings_a_line_does_not_show_are_redacted_again():
    secret = "s3cr3t-value-42"
    inner = MemoryRecorder()
    recorder = RedactingRecorder(inner, Redactor([secret]))
    line = '{"_tag":"ToolCall","callId":"c1","name":"run","input":{"arg":"x"},"status":null}'
    recorder.raw_line("stdout", line)
    recorder.event(0, AgentEvent("ToolCall", {"call_id": "c1", "input": f"uses {secret}"}))
    recorder.event(0, AgentEvent("ToolCall", {"call_id": "c1", "input": '{"arg": "x"}'}))

    first, second = (event.data for _, event in inner.events)
    assert first == {"call_id": "c1", "input": f"uses {REDACTED}"}
    assert second == {"call_id": "c1", "input": '{"arg": "x"}'}


def test_a_tool_input_the_parser_wrote_differently_is_still_redacted():
    # The line shows the number as 1.2345678e7; the input kept as JSON text reads 12345678.0.
    secret = "12345678"
    inner = MemoryRecorder()
    recorder = RedactingRecorder(inner, Redactor([secret]))
    line = '{"_tag": "ToolCall", "callId": "c1", "name": "run", "input": {"n": 1.2345678e7}, "status": null}'  # noqa: E501
    recorder.raw_line("stdout", line)
    recorder.event(0, parse_line(line))

    ((_, event),) = inner.events
    assert secret not in event.data["input"]
    assert REDACTED in event.data["input"]


def test_a_tool_input_the_line_shows_as_it_is_keeps_its_text():
    inner = MemoryRecorder()
    recorder = RedactingRecorder(inner, Redactor(["s3cr3t-value-42"]))
    line = '{"_tag": "ToolCall", "callId": "c1", "name": "run", "input": {"path": "a.py"}, "status": null}'  # noqa: E501
    recorder.raw_line("stdout", line)
    recorder.event(0, parse_line(line))

    ((_, event),) = inner.events
    assert event.data["input"] == '{"path": "a.py"}'
