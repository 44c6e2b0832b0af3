"""The shortcuts the ingest path takes give what the careful paths give.

A well-formed protocol line is read by a fast path (one ``orjson.loads`` and the field checks);
any line must come out as the careful reader makes it. A flat event already storable is kept
as it is; the careful copy must equal it. A long text is scanned for ``token: value`` shapes
only where one could match; a credential anywhere in it must still be hidden. The lines of one
read are redacted as one text first; each must come out as it would alone.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.agent_events import MAX_AT_MS, MAX_INT64, AgentEvent, storable_event
from proctor.protocol import KNOWN_TAGS, _parse_checked, parse_line
from runner.core.redaction import REDACTED, Redactor
from runner.core.reporting import MemoryRecorder, RawOutput, RedactingRecorder
from runner.harnesses.base import StreamReader

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
    {"_tag": "Message", "text": "hi"},
    {"_tag": "Message", "role": "user", "text": "go on", "usage": None},
    {"_tag": "Command", "command": "ls", "exitCode": 0, "output": "a"},
    {"_tag": "Command", "command": "ls", "exitCode": None},
    {"_tag": "ToolCall", "callId": None, "name": "read", "input": "a.py", "output": {"n": [1]}, "error": "no", "status": "failed"},
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


@settings(max_examples=1_000, deadline=None)
@given(protocol_lines(), st.sampled_from([4, 16, 64, 1024, 65536, None]))
def test_an_event_the_fast_path_vouched_for_is_stored_as_the_careful_one(line, cap):
    # None: the cap at the very bound the fast path vouches for (see AgentEvent.fits_in).
    cap = cap or 8 * len(line.strip())
    fast, careful = parse_line(line, now_ms=5), _parse_checked(line.strip(), 5)

    def stored(event: AgentEvent | None):
        return as_stored(None if event is None else storable_event(event, max_field_bytes=cap))

    assert stored(fast) == stored(careful)


@pytest.mark.parametrize(
    "item",
    ["{}", "1e15", '{"a":-1e15}', '"\U0001f600"'],
    ids=["separators", "numbers", "objects", "wide-characters"],
)
def test_a_tool_input_written_again_wider_still_fits_what_its_line_vouches_for(item):
    # Compact JSON gains a space after every comma and colon when written again as text, and
    # a number in exponent form comes back written out ("1e15": "1000000000000000.0").
    items = ",".join([item] * 500)
    line = f'{{"_tag":"ToolCall","callId":null,"name":"n","status":null,"input":[{items}]}}'
    event = parse_line(line)

    assert event.kind == "ToolCall"
    assert len(event.data["input"].encode()) <= event.fits_in
    assert storable_event(event, max_field_bytes=event.fits_in) is event


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


# Lines that hold a credential's shape or a known secret, whole or split over two lines, and
# ordinary ones: a read mixes them.
SHAPED_LINES = [
    "sk-proj-abc123def456ghi789jkl0",
    "Authorization: Bearer abcdefgh1234",
    "api_key=zyxwvut98765",
    '{"token": "abcdefgh1234"}',
    "ghp_" + "a" * 30,
    "AKIAABCDEFGHIJKLMNOP",
    "uses s3cr3t-value-42 here",
    "s3cr3t-",
    "value-42",
    "-----BEGIN RSA PRIVATE KEY-----",
    "MIIEpAIBAAKCAQEA",
    "-----END RSA PRIVATE KEY-----",
    "password:",
    "  hunter2hunter2",
    "step 3: reading the file",
]


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from(SHAPED_LINES), st.text(max_size=20)), min_size=1, max_size=12
    )
)
def test_a_read_is_redacted_as_its_lines_would_be_one_by_one(lines):
    lines = [line.replace("\n", " ") for line in lines]  # a line never holds a newline
    redactor = Redactor(["s3cr3t-value-42"])
    one_by_one, at_once = MemoryRecorder(), MemoryRecorder()
    for line in lines:
        RedactingRecorder(one_by_one, redactor).raw_line("stdout", line)

    RedactingRecorder(at_once, redactor).raw_lines("stdout", lines)

    assert at_once.raw == one_by_one.raw


def test_the_events_of_one_read_are_checked_against_their_own_lines():
    secret = "s3cr3t-value-42"
    inner = MemoryRecorder()
    recorder = RedactingRecorder(inner, Redactor([secret]))
    clean = '{"_tag": "Message", "role": "assistant", "text": "all good"}'
    dirty = f'{{"_tag": "Message", "role": "assistant", "text": "the key is {secret}"}}'
    parsed: list[AgentEvent] = []

    def read_line(line: str) -> list[AgentEvent]:
        event = parse_line(line)
        parsed.append(event)
        return [event]

    class Emit:
        def __call__(self, event: AgentEvent) -> None:
            raise AssertionError("a read's events arrive together")

        def many(self, events: list[AgentEvent]) -> None:
            recorder.many_events(0, events)

    StreamReader(RawOutput(recorder), read_line, Emit()).lines("stdout", [clean, dirty])

    assert [line for _, line in inner.raw] == [clean, dirty.replace(secret, REDACTED)]
    (_, first), (_, second) = inner.events
    assert parsed[0].line == clean
    assert first is parsed[0]  # from a clean line: passed on as it came
    assert second.data["text"] == f"the key is {REDACTED}"
    assert second.line is None  # the line that held the secret is not passed on
