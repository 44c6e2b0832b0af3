"""Codex's ``exec --json`` output turned into Proctor events, on lines recorded from the real CLI
(fixtures/codex_*.jsonl, captured by test_codex_cli.py) and a few written by hand for cases a
fake server cannot provoke."""

from __future__ import annotations

import json
from pathlib import Path

from proctor.agent_events import AgentEvent
from runner.core.transcript import TurnTranscript
from runner.harnesses.codex.stream import CodexStreamParser, unwrap_shell

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def parse(lines: list[str], **kwargs) -> tuple[CodexStreamParser, list[AgentEvent]]:
    parser = CodexStreamParser(**kwargs)
    events = [event for line in lines for event in parser.feed(line)]
    return parser, events + parser.finish()


def fixture(name: str) -> list[str]:
    return (FIXTURES / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()


def transcript(events: list[AgentEvent]) -> TurnTranscript:
    turn = TurnTranscript(index=0, prompt="")
    for event in events:
        turn.add(event)
    return turn


def line(**obj) -> str:
    return json.dumps(obj)


def test_it_reads_a_recorded_tool_using_turn():
    lines = fixture("codex_tool_turn")
    thread_id = json.loads(lines[0])["thread_id"]
    parser, events = parse(lines, model="gpt-fake-codex")
    turn = transcript(events)

    assert events[0].kind == "Started" and events[0].data == {
        "session_id": thread_id,
        "model": "gpt-fake-codex",
    }
    assert [(c["command"], c["exit_code"]) for c in turn.commands] == [
        ("echo hi > hello.txt && cat hello.txt", 0),
        ("ls /nope", 2),
    ]
    assert turn.commands[1]["output"] == "ls: cannot access '/nope': No such file or directory\n"
    assert len(turn.file_changes) == 1 and turn.file_changes[0].endswith("/notes.md")
    assert turn.file_changes[0].startswith("/")
    assert turn.answer == "Done: hello.txt holds hi."
    # The unknown model's warning item is not an event and not a failure.
    assert parser.finish_reason == "completed"
    assert [e.kind for e in events][-1] == "Usage"


def test_it_records_a_first_turns_usage_as_reported():
    lines = fixture("codex_first_turn")
    reported = json.loads(lines[-1])["usage"]
    parser, _ = parse(lines)

    assert parser.usage == {
        "input_tokens": reported["input_tokens"],
        "output_tokens": reported["output_tokens"],
        "cache_read_tokens": reported["cached_input_tokens"],
        "cache_write_tokens": reported["cache_write_input_tokens"],
        "total_tokens": reported["input_tokens"] + reported["output_tokens"],
    }
    assert parser.totals == parser.usage


def test_it_subtracts_the_previous_turns_totals_from_a_resumed_turns_usage():
    first, _ = parse(fixture("codex_first_turn"))
    resumed, events = parse(fixture("codex_resumed_turn"), previous_totals=first.totals)

    reported = json.loads(fixture("codex_resumed_turn")[-1])["usage"]
    assert resumed.totals["input_tokens"] == reported["input_tokens"]
    assert resumed.usage["input_tokens"] == reported["input_tokens"] - first.totals["input_tokens"]
    assert (
        resumed.usage["output_tokens"] == reported["output_tokens"] - first.totals["output_tokens"]
    )
    assert (
        resumed.usage["cache_read_tokens"]
        == reported["cached_input_tokens"] - first.totals["cache_read_tokens"]
    )
    assert [e.data for e in events if e.kind == "Usage"] == [resumed.usage]
    assert resumed.session_id == first.session_id


def test_it_takes_totals_that_went_down_as_the_turns_own():
    parser, _ = parse(
        [line(type="turn.completed", usage={"input_tokens": 10, "output_tokens": 5})],
        previous_totals={
            "input_tokens": 100,
            "output_tokens": 50,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
            "total_tokens": 150,
        },
    )

    assert parser.usage["input_tokens"] == 10 and parser.usage["output_tokens"] == 5


def test_it_ends_a_failed_turn_with_the_error():
    parser, events = parse(fixture("codex_turn_failed"))

    assert parser.finish_reason.startswith(
        "failed: Codex ran out of room in the model's context window"
    )
    assert [e.kind for e in events] == ["Started"]
    assert parser.answer == "" and parser.usage == {}


def test_it_turns_tool_items_into_tool_calls_and_skips_unknown_ones():
    _, events = parse(
        [
            line(type="thread.started", thread_id="t1"),
            line(
                type="item.completed",
                item={
                    "id": "item_1",
                    "type": "mcp_tool_call",
                    "server": "docs",
                    "tool": "search",
                    "arguments": {"q": "x"},
                    "status": "completed",
                    "result": {"content": [{"type": "text", "text": "found"}]},
                    "error": None,
                },
            ),
            line(
                type="item.completed",
                item={"id": "item_2", "type": "web_search", "query": "django 5.2"},
            ),
            line(
                type="item.completed",
                item={"id": "item_3", "type": "reasoning", "text": "thinking"},
            ),
            line(
                type="item.completed",
                item={"id": "item_4", "type": "hologram", "text": "from the future"},
            ),
            line(type="item.updated", item={"id": "item_5", "type": "todo_list", "items": []}),
            line(type="something.new", payload=1),
            "Reading additional input from stdin...",
        ]
    )

    calls = [e.data for e in events if e.kind == "ToolCall"]
    assert [(c["name"], c["output"], c["status"]) for c in calls] == [
        ("mcp__docs__search", "found", "completed"),
        ("web_search", None, "completed"),
    ]
    assert json.loads(calls[0]["input"]) == {"q": "x"}
    assert [e.kind for e in events] == ["Started", "ToolCall", "ToolCall"]


def test_it_lists_a_declined_command_as_refused_not_run():
    parser, events = parse(
        [
            line(
                type="item.completed",
                item={
                    "id": "item_1",
                    "type": "command_execution",
                    "command": "/bin/bash -lc 'rm -rf /'",
                    "aggregated_output": "",
                    "exit_code": None,
                    "status": "declined",
                },
            ),
        ]
    )

    assert events == []
    assert parser.permission_denials == [
        {"tool": "command_execution", "input": "rm -rf /", "call_id": "item_1"}
    ]


def test_it_answers_with_the_plan_when_no_message_came():
    parser, events = parse(
        [line(type="item.completed", item={"id": "item_1", "type": "plan", "text": "1. Do it."})]
    )

    assert parser.answer == "1. Do it."
    assert [e.data["text"] for e in events if e.kind == "Message"] == ["1. Do it."]


def test_it_unwraps_only_the_shell_wrapper_codex_adds():
    assert unwrap_shell("/bin/bash -lc 'ls /nope'") == "ls /nope"
    assert unwrap_shell("bash -c \"echo 'a b'\"") == "echo 'a b'"
    assert unwrap_shell("python3 -c 'print(1)'") == "python3 -c 'print(1)'"
    assert unwrap_shell("/bin/bash -lc 'unterminated") == "/bin/bash -lc 'unterminated"
