"""OpenCode's ``run --format json`` output turned into Proctor events, on lines recorded from the
real CLI (fixtures/opencode_*.jsonl, captured by test_opencode_cli.py) and a few written by hand
for cases a fake server cannot provoke."""

from __future__ import annotations

import json
from pathlib import Path

from proctor.agent_events import AgentEvent
from runner.core.transcript import TurnTranscript
from runner.harnesses.opencode.harness import OpenCodeStreamParser, changed_paths

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def fixture(name: str) -> list[str]:
    return (FIXTURES / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()


def parse(lines: list[str]) -> tuple[OpenCodeStreamParser, list[AgentEvent]]:
    parser = OpenCodeStreamParser(cwd="/work", model="fake/fake-model")
    events = [event for line in lines for event in parser.feed(line)]
    return parser, events + parser.finish()


def transcript(events: list[AgentEvent]) -> TurnTranscript:
    turn = TurnTranscript(index=0, prompt="")
    for event in events:
        turn.add(event)
    return turn


def line(kind: str, **part) -> str:
    return json.dumps({"type": kind, "timestamp": 1, "sessionID": "ses_1", "part": part})


def test_it_reads_a_recorded_tool_using_turn():
    lines = fixture("opencode_tool_turn")
    session_id = json.loads(lines[0])["sessionID"]
    parser, events = parse(lines)
    turn = transcript(events)

    assert events[0].kind == "Started"
    assert events[0].data == {"session_id": session_id, "model": "fake/fake-model"}
    assert [(c["command"], c["exit_code"], c["output"]) for c in turn.commands] == [
        ("echo hi > hello.txt && cat hello.txt", 0, "hi\n"),
        ("echo oops; exit 3", 3, "oops\n"),
    ]
    assert [(c["name"], c["status"]) for c in turn.tool_calls] == [
        ("bash", "completed"),
        ("bash", "completed"),
        ("write", "completed"),
    ]
    assert len(turn.file_changes) == 1 and turn.file_changes[0].endswith("/notes.md")
    assert [m["text"] for m in turn.messages] == ["Writing notes.", "Done: hello.txt holds hi."]
    # Tokens come per step: the input counts the cached tokens OpenCode reports apart.
    assert parser.usage == {
        "input_tokens": 400,
        "output_tokens": 80,
        "cache_read_tokens": 40,
        "cache_write_tokens": 0,
        "total_tokens": 480,
    }
    assert turn.usage["input_tokens"] == 400
    assert (parser.answer, parser.finish_reason, parser.permission_denials) == (
        "Done: hello.txt holds hi.",
        "completed",
        [],
    )


def test_it_reads_a_recorded_refusal_as_a_permission_denial_without_a_command():
    parser, events = parse(fixture("opencode_refused_turn"))
    turn = transcript(events)

    assert [(c["name"], c["status"]) for c in turn.tool_calls] == [("bash", "error")]
    assert turn.tool_calls[0]["error"].startswith("The user has specified a rule")
    assert turn.commands == []
    assert [(d["tool"], json.loads(d["input"])["command"]) for d in parser.permission_denials] == [
        ("bash", "echo hi > hello.txt")
    ]
    assert parser.answer == "I was not allowed."


def test_it_reads_a_recorded_planning_turn():
    parser, events = parse(fixture("opencode_plan_turn"))
    turn = transcript(events)

    assert [(c["name"], c["status"]) for c in turn.tool_calls] == [
        ("write", "error"),
        ("write", "completed"),
    ]
    assert [d["tool"] for d in parser.permission_denials] == ["write"]
    assert "/.opencode/plans/" in turn.file_changes[0]
    assert parser.answer == "My plan is ready."


def test_it_reads_a_recorded_resumed_turn():
    lines = fixture("opencode_resumed_turn")
    parser, events = parse(lines)

    assert parser.session_id == json.loads(lines[0])["sessionID"]
    assert [(c["command"], c["exit_code"]) for c in transcript(events).commands] == [
        ("cat first.txt", 0)
    ]
    assert parser.answer == "It says one."


def test_it_reads_a_recorded_api_error():
    parser, events = parse(fixture("opencode_api_error"))

    assert parser.finish_reason == "error: This model's maximum context length is exceeded."
    assert [e.kind for e in events] == ["Started", "Log"]
    assert parser.answer == ""


def test_it_keeps_a_killed_command_without_an_exit_code_and_skips_unknown_lines():
    parser, events = parse(
        [
            line("step_start", type="step-start"),
            line("reasoning", type="reasoning", text="thinking"),
            json.dumps({"type": "something_new", "sessionID": "ses_1"}),
            "plain text",
            line(
                "tool_use",
                type="tool",
                tool="bash",
                callID="c1",
                state={
                    "status": "error",
                    "input": {"command": "sleep 999"},
                    "error": "Command timed out",
                    "metadata": {"output": "", "exit": None},
                },
            ),
        ]
    )
    turn = transcript(events)

    assert [(c["command"], c["exit_code"]) for c in turn.commands] == [("sleep 999", None)]
    assert [(c["status"], c["error"]) for c in turn.tool_calls] == [("error", "Command timed out")]
    assert parser.permission_denials == []
    assert parser.finish_reason is None  # the model never said it stopped: the exit decides


def test_it_reports_why_the_model_stopped_when_it_was_not_done():
    parser, _ = parse(
        [
            line(
                "step_finish",
                type="step-finish",
                reason="length",
                tokens={"input": 5, "output": 7, "reasoning": 3, "cache": {"read": 1, "write": 2}},
            )
        ]
    )

    assert parser.finish_reason == "length"
    assert parser.usage == {
        "input_tokens": 8,
        "output_tokens": 10,
        "cache_read_tokens": 1,
        "cache_write_tokens": 2,
        "total_tokens": 18,
    }


def test_it_finds_the_files_an_edit_tool_changed():
    assert changed_paths(
        {"input": {"filePath": "/w/a.py"}, "metadata": {"filepath": "/w/a.py"}}
    ) == ["/w/a.py"]
    assert changed_paths(
        {
            "input": {"patchText": "..."},
            "metadata": {"files": [{"filePath": "/w/a.py"}, {"path": "/w/b.py"}, "/w/c.py"]},
        }
    ) == ["/w/a.py", "/w/b.py", "/w/c.py"]
    assert changed_paths({"input": "odd", "metadata": None}) == []
