"""Every byte an agent prints is safe to store (issue 11, part 6): each stdout line is an event,
a recorded protocol error or ordinary logging, never an exception, and what the recorder keeps
goes into the database (SQLite, and PostgreSQL when DATABASE_URL names one) and comes back.

The hypothesis tests generate over 10,000 lines a run each; run this module on PostgreSQL with
``DATABASE_URL=postgresql://postgres@127.0.0.1:5432/proctor_bytes``.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from api.factories import make_batch, make_case, make_org, make_variant
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evals_app.models import Event, Trial
from proctor.agent_events import (
    MAX_AT_MS,
    MAX_INT64,
    MIN_INT64,
    NUL_MARK,
    AgentEvent,
    cap_text,
    storable_event,
    truncation_mark,
)
from proctor.protocol import KNOWN_TAGS, parse_line
from runner.core.reporting import TrialOutcome
from runner.jobs.database_recorder import DatabaseRecorder

NOW = 1_788_300_000_000
OWNER = "test-process"  # the lease the trial runs under: the recorder writes only under it
FIELDS = [
    "sessionId",
    "model",
    "role",
    "text",
    "usage",
    "command",
    "exitCode",
    "output",
    "paths",
    "callId",
    "name",
    "input",
    "error",
    "status",
    "inputTokens",
    "outputTokens",
    "cacheReadTokens",
    "cacheWriteTokens",
    "totalTokens",
    "reason",
    "at",
]
BIG_FIELD = "é" * 40_000 + "x" * 40_000  # 120,000 bytes: over the 64 KiB default cap

# The characters that broke storage (NUL, lone surrogates), others of every UTF-8 length, and
# JSON's own escapes.
NASTY_CHARS = ["a", "\x00", "\ud800", "\udfff", "\ufffd", "é", "€", "😀", "\n", '"', "\\", "\x7f"]
nasty_text = st.one_of(
    st.text(st.sampled_from(NASTY_CHARS), max_size=6),
    st.sampled_from(["assistant", "user", "done"]),
)
nasty_number = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([MAX_INT64, MAX_INT64 + 1, MIN_INT64 - 1, MAX_AT_MS + 1, -1, 0, 10**400]),
    st.floats(),
)
scalar = st.one_of(st.none(), st.booleans(), nasty_number, nasty_text)
json_value = st.one_of(
    scalar,
    st.lists(scalar, max_size=2),
    st.dictionaries(st.sampled_from(FIELDS), scalar, max_size=3),
)
event_objects = st.builds(
    lambda tag, fields: {"_tag": tag, **fields},
    st.one_of(st.sampled_from(KNOWN_TAGS), nasty_text),
    st.dictionaries(st.sampled_from(FIELDS), json_value, max_size=4),
)


@st.composite
def lines(draw) -> str:
    """One stdout line as the reader hands it over: mostly event-like JSON, with every kind of
    damage an agent's output can carry."""
    shape = draw(st.sampled_from(["event"] * 6 + ["bytes", "cut", "deep", "mark", "big"]))
    if shape == "bytes":
        return draw(st.binary(max_size=60)).decode("utf-8", errors="replace")
    obj = draw(event_objects)
    if shape == "big":
        obj[draw(st.sampled_from(FIELDS))] = BIG_FIELD
    line = json.dumps(obj, ensure_ascii=draw(st.booleans()))
    if shape == "cut":
        return line[: draw(st.integers(0, len(line)))]
    if shape == "deep":
        depth = draw(st.sampled_from([10, 500, 990, 1_100, 20_000]))
        return line[:-1] + ', "input": ' + "[" * depth + "]" * depth + "}"
    if shape == "mark":
        return line[: draw(st.integers(0, len(line)))] + truncation_mark(12345)
    return line


def random_line(rng: random.Random) -> str:
    """A line drawn like :func:`lines` draws one, from a seeded generator: cheap enough to
    put 10,000 lines a run through the database."""

    def text() -> str:
        return "".join(rng.choice(NASTY_CHARS) for _ in range(rng.randrange(7)))

    def value(depth: int = 0):
        pick = rng.randrange(9 if depth == 0 else 7)
        if pick == 0:
            return rng.choice([None, True, False])
        if pick in (1, 2):
            return rng.choice(
                [rng.randint(-(2**70), 2**70), rng.randint(-1000, 10**15), MAX_INT64 + 1, 10**400]
            )
        if pick == 3:
            return rng.choice([math.nan, math.inf, -math.inf, rng.uniform(-1e300, 1e300)])
        if pick in (4, 5, 6):
            return rng.choice([text(), "assistant", "user", "done"])
        if pick == 7:
            return [value(1) for _ in range(rng.randrange(3))]
        return {rng.choice(FIELDS): value(1) for _ in range(rng.randrange(3))}

    shape = rng.choice(["event"] * 6 + ["bytes", "cut", "deep", "mark", "big"])
    if shape == "bytes":
        return bytes(rng.randrange(256) for _ in range(rng.randrange(60))).decode(
            "utf-8", errors="replace"
        )
    tag = rng.choice([*KNOWN_TAGS, *KNOWN_TAGS, text()])
    obj = {"_tag": tag, **{rng.choice(FIELDS): value() for _ in range(rng.randrange(5))}}
    if shape == "big":
        obj[rng.choice(FIELDS)] = BIG_FIELD
    line = json.dumps(obj, ensure_ascii=rng.random() < 0.5)
    if shape == "cut":
        return line[: rng.randrange(len(line) + 1)]
    if shape == "deep":
        depth = rng.choice([10, 500, 990, 1_100, 20_000])
        return line[:-1] + ', "input": ' + "[" * depth + "]" * depth + "}"
    if shape == "mark":
        return line[: rng.randrange(len(line) + 1)] + truncation_mark(12345)
    return line


def assert_storable(value, path: str = "data") -> None:
    """Nothing PostgreSQL's jsonb, SQLite or a UTF-8 file would refuse."""
    if isinstance(value, str):
        assert "\x00" not in value, path
        value.encode("utf-8")  # no lone surrogates
    elif isinstance(value, bool) or value is None:
        pass
    elif isinstance(value, int):
        assert MIN_INT64 <= value <= MAX_INT64, path
    elif isinstance(value, float):
        assert math.isfinite(value), path
    elif isinstance(value, dict):
        for key, item in value.items():
            assert_storable(key, path)
            assert_storable(item, f"{path}.{key}")
    elif isinstance(value, list):
        for item in value:
            assert_storable(item, path)
    else:
        raise AssertionError(f"{path}: {type(value).__name__}")


def check_parsed(line: str, event: AgentEvent | None) -> None:
    if event is None:
        return
    assert event.kind in (*KNOWN_TAGS, "ProtocolError")
    if event.kind == "Message":
        assert event.data["role"] in ("assistant", "user")
    stored = storable_event(event)
    assert_storable(stored.data)
    assert 0 <= stored.at_ms <= MAX_AT_MS
    for value in stored.data.values():
        if isinstance(value, str):
            assert len(value.encode()) <= 64 * 1024


# --- the parser, over generated lines ---


@settings(
    max_examples=10_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(lines())
def test_every_line_is_an_event_an_error_or_logging_never_an_exception(line):
    check_parsed(line, parse_line(line, now_ms=NOW))


# --- each fault of the table, by name ---


def parse(text: str) -> AgentEvent:
    event = parse_line(text, now_ms=NOW)
    assert event is not None
    return event


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (
            '{"_tag":"Command","command":"x","exitCode":9223372036854775808}',
            "Command: field 'exitCode' is outside the signed 64-bit integer range",
        ),
        (
            '{"_tag":"Usage","inputTokens":' + "9" * 5000 + ',"outputTokens":1}',
            "Usage: field 'inputTokens' is outside the signed 64-bit integer range",
        ),
        (
            '{"_tag":"Finished","reason":"done","at":1e300}',
            "Finished: field 'at' is out of range (epoch milliseconds up to the year 9999)",
        ),
        (
            '{"_tag":"Finished","reason":"done","at":253402300800000}',
            "Finished: field 'at' is out of range (epoch milliseconds up to the year 9999)",
        ),
        (
            '{"_tag":"Message","role":"","text":"hi"}',
            "Message: field 'role' must be 'assistant' or 'user'",
        ),
        (
            '{"_tag":"Message","role":"system","text":"hi"}',
            "Message: field 'role' must be 'assistant' or 'user'",
        ),
        (
            '{"_tag":"ToolCall","name":"n","input":' + "[" * 5000 + "]" * 5000 + "}",
            "ToolCall: the line nests JSON too deeply to read",
        ),
        (
            '{"_tag":"Message","text":"' + "x" * 100 + truncation_mark(99_999_900),
            "Message: the line is longer than the reader keeps",
        ),
    ],
)
def test_a_fault_is_a_protocol_error_with_its_reason(line, error):
    event = parse(line)

    assert (event.kind, event.data["error"]) == ("ProtocolError", error)


def test_a_line_over_16_mib_is_a_protocol_error_without_being_parsed():
    event = parse('{"_tag":"Message","text":"' + "x" * (16 * 1024 * 1024) + '"}')

    assert event.data["error"] == "Message: the line is longer than 16777216 characters"
    assert len(event.data["line"]) == 4000


def test_a_nul_byte_is_shown_with_a_mark_and_a_note():
    event = parse('{"_tag":"Message","text":"before\\u0000after"}')

    assert event.data["text"] == f"before{NUL_MARK}after"
    assert event.data["notes"] == [f"text: 1 NUL byte(s) shown as {NUL_MARK}"]


def test_a_lone_surrogate_is_replaced_with_a_note():
    event = parse('{"_tag":"Command","command":"ls \\ud800","exitCode":0}')

    assert event.data["command"] == "ls \ufffd"
    assert event.data["notes"] == ["command: invalid UTF-8 or lone surrogates replaced with U+FFFD"]


def test_a_huge_number_inside_a_tool_input_is_kept_as_its_digits():
    digits = "1" + "0" * 30
    event = parse(
        '{"_tag":"ToolCall","callId":null,"status":null,"name":"n","input":{"n":' + digits + "}}"
    )

    assert event.data["input"] == json.dumps({"n": digits})


def test_a_long_field_is_capped_with_the_count_of_bytes_cut():
    text = "x" * 10_000_000

    capped = cap_text(text, 65_536)

    assert 65_500 < len(capped.encode()) <= 65_536
    assert capped.endswith(truncation_mark(10_000_000 - len(capped.split("…")[0])))
    assert cap_text(capped, 65_536) == capped, "capping twice changes nothing"


def test_an_event_built_by_another_harness_is_made_storable():
    event = AgentEvent("Log", {"n": 2**70, "f": math.inf, "t": "a\x00"}, at_ms=10**20)

    stored = storable_event(event)

    assert stored.data["n"] == MAX_INT64 and stored.data["f"] is None
    assert stored.data["t"] == f"a{NUL_MARK}" and stored.at_ms == 0
    assert len(stored.data["notes"]) == 4


# --- stored, and read back from the database ---


@pytest.fixture
def trial(db, settings, tmp_path: Path) -> Trial:
    settings.ARTIFACTS_DIR = tmp_path
    org = make_org("acme")
    batch = make_batch(org, [make_case(org, "health")], [make_variant(org, "careful")], statuses=[])
    return Trial.objects.create(
        run=batch.runs.get(), index=0, status=Trial.Status.RUNNING, lease_owner=OWNER
    )


def feed(recorder: DatabaseRecorder, line: str) -> AgentEvent | None:
    """What the command harness does with a stdout line."""
    recorder.raw_line("stdout", line)
    event = parse_line(line)
    if event is not None:
        recorder.event(0, event)
    return event


def feed_reads(recorder: DatabaseRecorder, lines: list[str], per_read: int) -> None:
    """What the command harness does with stdout read ``per_read`` lines at a time (1: line
    by line, through the single-line calls)."""
    if per_read == 1:
        for line in lines:
            feed(recorder, line)
        return
    for start in range(0, len(lines), per_read):
        read = lines[start : start + per_read]
        recorder.raw_lines("stdout", read)
        recorder.many_events(0, [e for e in map(parse_line, read) if e is not None])


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.randoms(use_true_random=False))
def test_what_is_stored_reads_back_from_the_database(trial, rng):
    # 100 examples of 100 lines: 10,000 lines through the recorder into real rows.
    batch_of_lines = [random_line(rng) for _ in range(100)]
    # Each example records the same trial again: running under the lease, as its run began.
    Trial.objects.filter(pk=trial.pk).update(status=Trial.Status.RUNNING, lease_owner=OWNER)
    recorder = DatabaseRecorder(trial, owner=OWNER)
    first = recorder.buffer.next_seq
    expected = []
    for line in batch_of_lines:
        event = feed(recorder, line)
        if event is not None:
            expected.append(json.loads(json.dumps(storable_event(event).data)))
    answer = batch_of_lines[0]
    recorder.trial_finished(TrialOutcome("passed", answer=answer, finish_reason=answer))

    rows = Event.objects.filter(trial=trial, seq__gte=first).order_by("seq")
    assert [row.data for row in rows] == expected
    for row in rows:
        assert_storable(row.data)
    stored = Trial.objects.get(pk=trial.pk)
    assert "\x00" not in stored.answer


@pytest.mark.parametrize("per_read", [1, 30, 300], ids=["line-by-line", "30-a-read", "300-a-read"])
def test_the_number_of_events_a_trial_keeps_is_capped_with_a_note(trial, settings, per_read):
    settings.PROCTOR_MAX_TRIAL_EVENTS = 50
    recorder = DatabaseRecorder(trial, owner=OWNER)
    lines = [json.dumps({"_tag": "Message", "text": f"message {n}"}) for n in range(1_050)]
    feed_reads(recorder, lines, per_read)
    recorder.log("a note from Proctor is kept")
    recorder.trial_finished(TrialOutcome("passed"))

    kinds = list(Event.objects.filter(trial=trial).values_list("kind", "data"))
    assert len(kinds) == 52
    assert kinds[49][1]["text"] == "message 49"
    assert kinds[-1] == (
        "Log",
        {
            "stream": "proctor",
            "text": "1000 more events were dropped: a trial keeps at most 50 "
            "(PROCTOR_MAX_TRIAL_EVENTS).",
        },
    )


@pytest.mark.parametrize("per_read", [1, 30, 300], ids=["line-by-line", "30-a-read", "300-a-read"])
def test_output_log_is_capped_with_a_mark_and_the_bytes_not_kept(trial, settings, per_read):
    settings.PROCTOR_MAX_OUTPUT_LOG_BYTES = 10_000
    recorder = DatabaseRecorder(trial, owner=OWNER)
    feed_reads(recorder, ["y" * 99] * 1_000, per_read)  # 100 bytes a line with its newline
    recorder.trial_finished(TrialOutcome("passed"))

    log = (recorder.folder / "output.log").read_text()
    kept, mark, total = log.split("\n")[-4:-1][0], *log.split("\n")[-3:-1]
    assert log.count("y" * 99) == 100
    assert kept == "y" * 99
    assert mark == (
        "… [truncated: output.log keeps 10000 bytes (PROCTOR_MAX_OUTPUT_LOG_BYTES); "
        "the rest is counted, not kept]"
    )
    assert total == "… [truncated: 90000 bytes] not kept in output.log, capped at 10000 bytes"


def test_a_ten_megabyte_field_is_stored_capped(trial):
    recorder = DatabaseRecorder(trial, owner=OWNER)
    feed(recorder, json.dumps({"_tag": "Message", "text": "z" * 10_000_000}))
    recorder.trial_finished(TrialOutcome("passed"))

    (event,) = Event.objects.filter(trial=trial)
    assert 65_500 < len(event.data["text"].encode()) <= 64 * 1024
    assert event.data["text"].endswith(" bytes]")
    assert event.data["notes"] == ["text: truncated to 65536 bytes"]
