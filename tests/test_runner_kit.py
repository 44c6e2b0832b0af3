"""The Python runner kit: what an agent process reads from the harness and the lines it prints."""

from __future__ import annotations

import json

import pytest

from proctor.protocol import parse_line
from proctor.runner import (
    MalformedVariable,
    MissingVariable,
    ProtocolError,
    RunnerEnv,
    create_emitter,
    env,
)

AT = 1_788_300_005_000

HARNESS_ENV = {
    "SPHYNX_PROMPT": "Fix the total.",
    "SPHYNX_MODEL": "openai/gpt-5.5",
    "SPHYNX_WORKSPACE": "/workspace",
    "SPHYNX_HOME": "/home/agent",
    "SPHYNX_TRACE_LOG": "/tmp/trace.log",
}


@pytest.fixture
def lines() -> list[str]:
    return []


@pytest.fixture
def emit(lines):
    return create_emitter(write=lines.append, now=lambda: AT)


# --- env() ---


def test_it_reads_the_case_from_the_harness_variables():
    extras = {
        "SPHYNX_SYSTEM_PROMPT_FILE": "/profile/system.md",
        "PROCTOR_SESSION_ID": "sess-7",
        "PROCTOR_MODE": "plan",
        "PROCTOR_CASE_VARS": '{"topic": "bees", "count": 3, "kind": "bienen"}',
    }

    assert env({**HARNESS_ENV, **extras}) == RunnerEnv(
        prompt="Fix the total.",
        model="openai/gpt-5.5",
        workspace="/workspace",
        home="/home/agent",
        system_prompt_file="/profile/system.md",
        trace_log="/tmp/trace.log",
        session_id="sess-7",
        mode="plan",
        variables={"topic": "bees", "count": 3, "kind": "bienen"},
    )


def test_it_leaves_the_optional_variables_none_when_unset():
    case = env(HARNESS_ENV)

    assert (case.system_prompt_file, case.session_id, case.mode) == (None, None, None)
    assert case.variables == {}


def test_case_variables_too_large_for_the_environment_are_read_from_their_file(tmp_path):
    (tmp_path / "vars.json").write_text('{"doc": "' + "x" * 100_000 + '"}')

    case = env({**HARNESS_ENV, "PROCTOR_CASE_VARS_FILE": str(tmp_path / "vars.json")})

    assert len(case.variables["doc"]) == 100_000
    with pytest.raises(MalformedVariable) as raised:
        env({**HARNESS_ENV, "PROCTOR_CASE_VARS_FILE": str(tmp_path / "gone.json")})
    assert str(raised.value) == (
        f"PROCTOR_CASE_VARS_FILE ({tmp_path / 'gone.json'}) cannot be read: "
        "No such file or directory"
    )


def test_a_prompt_too_large_for_the_environment_is_read_from_its_file(tmp_path):
    (tmp_path / "prompt.md").write_text("summarise: " + "x" * 200_000, encoding="utf-8")
    without_inline = {k: v for k, v in HARNESS_ENV.items() if k != "SPHYNX_PROMPT"}

    case = env({**without_inline, "SPHYNX_PROMPT_FILE": str(tmp_path / "prompt.md")})

    assert case.prompt == "summarise: " + "x" * 200_000
    with pytest.raises(MalformedVariable) as raised:
        env({**without_inline, "SPHYNX_PROMPT_FILE": str(tmp_path / "gone.md")})
    assert str(raised.value) == (
        f"SPHYNX_PROMPT_FILE ({tmp_path / 'gone.md'}) cannot be read: No such file or directory"
    )


@pytest.mark.parametrize("text", ["[1, 2]", "{topic: bees}", '"bees"'])
def test_case_variables_that_are_no_json_object_are_named(text):
    with pytest.raises(MalformedVariable) as raised:
        env({**HARNESS_ENV, "PROCTOR_CASE_VARS": text})

    assert str(raised.value) == (
        f"PROCTOR_CASE_VARS is not a JSON object of the case's variables: {text!r}"
    )


def test_it_accepts_an_empty_model_for_a_variant_without_one():
    assert env({**HARNESS_ENV, "SPHYNX_MODEL": ""}).model == ""


def test_it_reads_os_environ_by_default(monkeypatch):
    for name, value in HARNESS_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PROCTOR_MODE", "act")

    case = env()

    assert case.prompt == "Fix the total."
    assert case.mode == "act"


@pytest.mark.parametrize("name", sorted(HARNESS_ENV))
def test_it_names_a_missing_variable(name):
    environ = {key: value for key, value in HARNESS_ENV.items() if key != name}

    with pytest.raises(MissingVariable) as raised:
        env(environ)

    assert str(raised.value) == (
        f"{name} is not set: run this process through Proctor's command harness, or set it by hand."
    )
    assert isinstance(raised.value, RuntimeError)


def test_the_runner_env_cannot_be_changed():
    case = env(HARNESS_ENV)

    with pytest.raises(AttributeError):
        case.prompt = "something else"  # type: ignore[misc]


# --- the exact lines ---


def test_it_prints_started(emit, lines):
    emit.started("run-42", model="openai/gpt-5.5")
    emit.started("run-43")

    assert lines == [
        '{"_tag":"Started","sessionId":"run-42","model":"openai/gpt-5.5","at":1788300005000}',
        '{"_tag":"Started","sessionId":"run-43","at":1788300005000}',
    ]


def test_it_prints_a_message_as_the_assistant_by_default(emit, lines):
    emit.message("Reading the failing test first.")

    assert lines == [
        '{"_tag":"Message","role":"assistant","text":"Reading the failing test first.",'
        '"at":1788300005000}'
    ]


def test_it_prints_a_message_with_usage_in_camel_case(emit, lines):
    emit.message(
        "Hi", role="user", usage={"input_tokens": 9, "output_tokens": 2, "cache_read_tokens": 4}
    )

    assert lines == [
        '{"_tag":"Message","role":"user","text":"Hi",'
        '"usage":{"inputTokens":9,"outputTokens":2,"cacheReadTokens":4},"at":1788300005000}'
    ]


def test_it_prints_a_tool_call_writing_values_that_are_not_strings_as_json(emit, lines):
    emit.tool_call("search", {"query": "total"}, output=["total.ts"])

    assert lines == [
        '{"_tag":"ToolCall","callId":null,"name":"search","input":"{\\"query\\": \\"total\\"}",'
        '"output":"[\\"total.ts\\"]","status":null,"at":1788300005000}'
    ]


def test_it_prints_a_tool_call_with_all_its_fields(emit, lines):
    emit.tool_call(
        "read", "src/total.ts", error={"code": "ENOENT"}, status="failed", call_id="call_7"
    )

    assert lines == [
        '{"_tag":"ToolCall","callId":"call_7","name":"read","input":"src/total.ts",'
        '"error":"{\\"code\\": \\"ENOENT\\"}","status":"failed","at":1788300005000}'
    ]


def test_it_prints_usage_with_cache_counts_defaulting_to_zero(emit, lines):
    emit.usage(input_tokens=900, output_tokens=40)
    emit.usage(9120, 312, cache_read_tokens=8000, cache_write_tokens=12)

    assert lines == [
        '{"_tag":"Usage","inputTokens":900,"outputTokens":40,"cacheReadTokens":0,'
        '"cacheWriteTokens":0,"at":1788300005000}',
        '{"_tag":"Usage","inputTokens":9120,"outputTokens":312,"cacheReadTokens":8000,'
        '"cacheWriteTokens":12,"at":1788300005000}',
    ]


def test_it_prints_a_command_whose_exit_code_may_be_unknown(emit, lines):
    emit.command("bun test", 1, "expect(5).toBe(6)\n")
    emit.command("make", None)

    assert lines == [
        '{"_tag":"Command","command":"bun test","exitCode":1,"output":"expect(5).toBe(6)\\n",'
        '"at":1788300005000}',
        '{"_tag":"Command","command":"make","exitCode":null,"output":"","at":1788300005000}',
    ]


def test_it_prints_a_file_change_for_one_path_or_many(emit, lines):
    emit.file_change("/workspace/src/total.ts")
    emit.file_change(["/workspace/a.ts", "/workspace/b.ts"])

    assert lines == [
        '{"_tag":"FileChange","paths":["/workspace/src/total.ts"],"at":1788300005000}',
        '{"_tag":"FileChange","paths":["/workspace/a.ts","/workspace/b.ts"],"at":1788300005000}',
    ]


def test_it_prints_finished_only_once(emit, lines):
    emit.finished("done")
    emit.finished("exit 0")

    assert lines == ['{"_tag":"Finished","reason":"done","at":1788300005000}']


def test_a_refused_finished_does_not_use_up_the_only_one(emit, lines):
    with pytest.raises(ProtocolError):
        emit.finished(None)  # type: ignore[arg-type]
    emit.finished("done")

    assert lines == ['{"_tag":"Finished","reason":"done","at":1788300005000}']


def test_it_stamps_each_line_with_the_injected_clock(lines):
    ticks = iter([1000, 2000])
    emit = create_emitter(write=lines.append, now=lambda: next(ticks))

    emit.message("one")
    emit.message("two")

    assert [json.loads(line)["at"] for line in lines] == [1000, 2000]


def test_it_prints_to_stdout_stamped_with_the_clock_by_default(capsys):
    emit = create_emitter()

    emit.finished("done")

    out = capsys.readouterr().out
    assert out.endswith("\n") and out.count("\n") == 1
    event = json.loads(out)
    assert event["_tag"] == "Finished" and event["reason"] == "done"
    # Epoch milliseconds, not seconds: later than 2020-01-01 in ms.
    assert isinstance(event["at"], int) and event["at"] > 1_577_836_800_000


def test_it_keeps_text_that_is_not_ascii_readable_after_parsing(emit, lines):
    emit.message("Größe: 5 €")

    assert lines[0].isascii()
    assert json.loads(lines[0])["text"] == "Größe: 5 €"


# --- refusals ---


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (
            lambda e: e.usage(-1, 5),
            "Usage: field 'inputTokens' must be a whole number, zero or more",
        ),
        (
            lambda e: e.usage(1, 2.5),
            "Usage: field 'outputTokens' must be a whole number, zero or more",
        ),
        (
            lambda e: e.usage(1, 2, cache_read_tokens=True),
            "Usage: field 'cacheReadTokens' must be a whole number, zero or more",
        ),
        (
            lambda e: e.message("x", role="system"),
            "Message: field 'role' must be 'assistant' or 'user'",
        ),
        (lambda e: e.message(["x"]), "Message: field 'text' must be a string"),
        (
            lambda e: e.message("x", usage={"output_tokens": 1}),
            "Message: missing field 'inputTokens'",
        ),
        (lambda e: e.message("x", usage=[1, 2]), "Message: field 'usage' must be an object"),
        (lambda e: e.started(42), "Started: field 'sessionId' must be a string"),
        (lambda e: e.started("run-1", model=7), "Started: field 'model' must be a string"),
        (
            lambda e: e.command("make", True),
            "Command: field 'exitCode' must be an integer or null",
        ),
        (lambda e: e.command("make", 0, output=b"ok"), None),
        (lambda e: e.file_change(["/a", 3]), "FileChange: field 'paths' must be a list of strings"),
        (lambda e: e.tool_call(None, "x"), "ToolCall: field 'name' must be a string"),
        (lambda e: e.tool_call("t", "x", status=1), "ToolCall: field 'status' must be a string"),
        (lambda e: e.tool_call("t", {1, 2}), None),
        (lambda e: e.tool_call("t", {"x": float("nan")}), None),
    ],
)
def test_it_refuses_what_the_runner_would_refuse_and_prints_nothing(emit, lines, call, error):
    with pytest.raises(ProtocolError) as raised:
        call(emit)

    if error is not None:
        assert str(raised.value) == error
    assert isinstance(raised.value, ValueError)
    assert lines == []


def test_it_refuses_a_clock_that_goes_negative(lines):
    emit = create_emitter(write=lines.append, now=lambda: -5)

    with pytest.raises(ProtocolError, match="'at' must be epoch milliseconds"):
        emit.finished("done")

    assert lines == []


def test_it_names_the_tag_of_a_value_json_cannot_write(emit):
    with pytest.raises(ProtocolError, match=r"^ToolCall: a value cannot be written as JSON"):
        emit.tool_call("t", object())


# --- round trip through the runner's parser ---


@pytest.mark.parametrize(
    ("call", "kind", "data"),
    [
        (
            lambda e: e.started("run-1", model="openai/gpt-5.5"),
            "Started",
            {"session_id": "run-1", "model": "openai/gpt-5.5"},
        ),
        (lambda e: e.started("run-1"), "Started", {"session_id": "run-1", "model": None}),
        (
            lambda e: e.message("Done.", usage={"input_tokens": 3, "output_tokens": 4}),
            "Message",
            {
                "role": "assistant",
                "text": "Done.",
                "usage": {
                    "input_tokens": 3,
                    "output_tokens": 4,
                    "cache_read_tokens": 0,
                    "cache_write_tokens": 0,
                    "total_tokens": 7,
                },
            },
        ),
        (
            lambda e: e.message("Next?", role="user"),
            "Message",
            {"role": "user", "text": "Next?", "usage": None},
        ),
        (
            lambda e: e.command("bun test", 1, "fail\n"),
            "Command",
            {"command": "bun test", "exit_code": 1, "output": "fail\n", "origin": "agent"},
        ),
        (
            lambda e: e.file_change("/workspace/a.ts"),
            "FileChange",
            {"paths": ["/workspace/a.ts"]},
        ),
        (
            lambda e: e.tool_call(
                "search", {"query": "größe"}, output=["a.ts"], status="completed", call_id="c1"
            ),
            "ToolCall",
            {
                "call_id": "c1",
                "name": "search",
                "input": '{"query": "größe"}',
                "output": '["a.ts"]',
                "error": None,
                "status": "completed",
            },
        ),
        (
            lambda e: e.tool_call("run", "ls", error="denied"),
            "ToolCall",
            {
                "call_id": None,
                "name": "run",
                "input": "ls",
                "output": None,
                "error": "denied",
                "status": None,
            },
        ),
        (
            lambda e: e.usage(900, 40, cache_read_tokens=800, cache_write_tokens=5),
            "Usage",
            {
                "input_tokens": 900,
                "output_tokens": 40,
                "cache_read_tokens": 800,
                "cache_write_tokens": 5,
                "total_tokens": 940,
            },
        ),
        (lambda e: e.finished("done"), "Finished", {"reason": "done"}),
    ],
)
def test_the_runner_reads_each_line_as_the_event_that_was_emitted(emit, lines, call, kind, data):
    call(emit)

    event = parse_line(lines[0], now_ms=1)

    assert (event.kind, event.data, event.at_ms) == (kind, data, AT)


def test_a_tool_input_the_kit_wrote_matches_one_the_process_printed_raw(emit, lines):
    raw = '{"_tag":"ToolCall","callId":null,"name":"t","input":{"q":"é","n":[1,2]},"status":null}'
    emit.tool_call("t", {"q": "é", "n": [1, 2]})

    assert parse_line(lines[0]).data == parse_line(raw).data
