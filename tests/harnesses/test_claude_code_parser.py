"""Claude Code's stream-json output turned into Proctor events, on lines recorded from the real
CLI (fixtures/claude_*.jsonl, captured by test_claude_code_cli.py) and a few written by hand for
cases a fake server cannot provoke."""

from __future__ import annotations

import json
from pathlib import Path

from proctor.agent_events import AgentEvent
from runner.core.transcript import TurnTranscript
from runner.harnesses.claude_code.stream import ClaudeStreamParser, exit_code_of_error

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def parse(
    lines: list[str], *, cwd: str | None = None
) -> tuple[ClaudeStreamParser, list[AgentEvent]]:
    parser = ClaudeStreamParser(cwd=cwd)
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
    lines = fixture("claude_tool_turn")
    init = json.loads(lines[0])
    parser, events = parse(lines)
    turn = transcript(events)

    assert events[0].kind == "Started"
    assert events[0].data == {"session_id": init["session_id"], "model": "claude-fake-1"}
    assert [(c["command"], c["exit_code"]) for c in turn.commands] == [
        ("echo hi > hello.txt && cat hello.txt", 0),
        ("ls /nope", 2),
    ]
    assert turn.commands[1]["output"] == "ls: cannot access '/nope': No such file or directory"
    assert [(c["name"], c["status"]) for c in turn.tool_calls] == [
        ("Bash", "completed"),
        ("Bash", "error"),
        ("Write", "completed"),
    ]
    assert turn.file_changes == [f"{init['cwd']}/notes.md"]
    # Text and tool use of one message arrive as two lines; the text is one message, said once,
    # and the final result (already said) is not repeated.
    assert [m["text"] for m in turn.messages] == ["Writing notes.", "Done: hello.txt holds hi."]
    assert parser.answer == "Done: hello.txt holds hi."
    assert parser.session_id == init["session_id"]
    assert parser.finish_reason == "completed"
    assert parser.permission_denials == []


def test_it_takes_usage_from_the_result_line_only():
    lines = fixture("claude_tool_turn")
    result = json.loads(lines[-1])["usage"]
    parser, events = parse(lines)

    assert [e.kind for e in events].count("Usage") == 1
    cached = result["cache_read_input_tokens"] + result["cache_creation_input_tokens"]
    assert parser.usage == {
        "input_tokens": result["input_tokens"] + cached,
        "output_tokens": result["output_tokens"],
        "cache_read_tokens": result["cache_read_input_tokens"],
        "cache_write_tokens": result["cache_creation_input_tokens"],
        "total_tokens": result["input_tokens"] + cached + result["output_tokens"],
    }
    assert [e.kind for e in events][-1] == "Usage"


def test_it_keeps_the_session_id_of_a_resumed_turn():
    lines = fixture("claude_resumed_turn")
    parser, events = parse(lines)

    assert {json.loads(x)["session_id"] for x in lines} == {parser.session_id}
    assert [e.kind for e in events].count("Started") == 1


def test_it_records_the_plan_written_in_plan_mode():
    lines = fixture("claude_plan_turn")
    init = json.loads(lines[0])
    _, events = parse(lines)
    turn = transcript(events)

    assert init["permissionMode"] == "plan"
    assert len(turn.file_changes) == 1 and "/.claude/plans/" in turn.file_changes[0]
    assert turn.answer == "My plan is ready."


def test_it_lists_refused_actions_without_inventing_changes():
    parser, events = parse(fixture("claude_refused_turn"))
    turn = transcript(events)

    assert [d["tool"] for d in parser.permission_denials] == ["Write"]
    assert json.loads(parser.permission_denials[0]["input"])["content"] == "g"
    assert turn.file_changes == []
    assert [(c["name"], c["status"]) for c in turn.tool_calls] == [("Write", "error")]


def test_it_gives_a_blocked_command_no_exit_code_and_no_command_event():
    blocked = "Output redirection to '/w/f.txt' was blocked."
    _, events = parse(
        [
            line(type="system", subtype="init", session_id="s1", model="m"),
            line(
                type="assistant",
                session_id="s1",
                parent_tool_use_id=None,
                message={
                    "id": "msg_1",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "Bash",
                            "input": {"command": "echo x > f.txt"},
                        }
                    ],
                },
            ),
            line(
                type="user",
                session_id="s1",
                message={
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": blocked,
                            "is_error": True,
                        }
                    ],
                },
                tool_use_result=f"Error: {blocked}",
            ),
        ]
    )

    assert [e.kind for e in events] == ["Started", "ToolCall"]
    assert events[1].data["error"] == blocked


def test_it_says_the_result_as_the_answer_when_no_message_did():
    parser, events = parse(
        [
            line(type="system", subtype="init", session_id="s1", model="m"),
            line(
                type="result",
                subtype="success",
                is_error=False,
                result="Only in the result.",
                session_id="s1",
                usage={"input_tokens": 3, "output_tokens": 2},
                permission_denials=[],
            ),
        ]
    )

    assert [(e.kind, e.data.get("text")) for e in events if e.kind == "Message"] == [
        ("Message", "Only in the result.")
    ]
    assert parser.usage["total_tokens"] == 5


def test_it_ends_with_the_error_of_a_failed_invocation_and_no_answer():
    api_error, events = parse(fixture("claude_api_error"))
    out_of_turns, _ = parse(
        [line(type="result", subtype="error_max_turns", is_error=True, session_id="s1")]
    )

    # The CLI's stand-in message for the failed call is not the model speaking.
    assert api_error.finish_reason.startswith("error: Prompt is too long")
    assert [e.kind for e in events if e.kind == "Message"] == []
    assert api_error.answer == ""
    assert out_of_turns.finish_reason == "error_max_turns"


def test_it_skips_lines_it_does_not_know_and_text_that_is_not_json():
    _, events = parse(
        [
            "some warning on stdout",
            line(type="system", subtype="init", session_id="s1", model="m"),
            line(type="rate_limit_event", session_id="s1", rate_limit_info={}),
            line(type="stream_event", session_id="s1", event={"type": "message_start"}),
            line(type="system", subtype="hook_started", session_id="s1"),
            "[1, 2]",
            line(
                type="assistant",
                session_id="s1",
                parent_tool_use_id=None,
                message={
                    "id": "m1",
                    "content": [
                        {"type": "thinking", "thinking": "hmm"},
                        {"type": "text", "text": "Hi."},
                    ],
                },
            ),
        ]
    )

    assert [(e.kind, e.data.get("text")) for e in events] == [("Started", None), ("Message", "Hi.")]


def test_it_leaves_a_subagents_words_out_of_the_answer_but_keeps_its_commands():
    _, events = parse(
        [
            line(type="system", subtype="init", session_id="s1", model="m"),
            line(
                type="assistant",
                session_id="s1",
                parent_tool_use_id="task1",
                message={
                    "id": "m1",
                    "content": [
                        {"type": "text", "text": "subagent thinking aloud"},
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "Bash",
                            "input": {"command": "ls"},
                        },
                    ],
                },
            ),
            line(
                type="user",
                session_id="s1",
                parent_tool_use_id="task1",
                message={
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": "a.txt",
                            "is_error": False,
                        }
                    ],
                },
            ),
        ]
    )

    assert [e.kind for e in events] == ["Started", "ToolCall", "Command"]


def test_it_reports_tool_calls_cut_off_by_a_timeout_as_incomplete():
    _, events = parse(
        [
            line(type="system", subtype="init", session_id="s1", model="m"),
            line(
                type="assistant",
                session_id="s1",
                parent_tool_use_id=None,
                message={
                    "id": "m1",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "Bash",
                            "input": {"command": "sleep 999"},
                        }
                    ],
                },
            ),
        ]
    )

    assert [(e.kind, e.data.get("status")) for e in events] == [
        ("Started", None),
        ("ToolCall", "incomplete"),
    ]


def test_it_makes_relative_file_paths_absolute():
    _, events = parse(
        [
            line(
                type="assistant",
                session_id="s1",
                parent_tool_use_id=None,
                message={
                    "id": "m1",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "Edit",
                            "input": {"file_path": "src/a.py"},
                        }
                    ],
                },
            ),
            line(
                type="user",
                session_id="s1",
                message={
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
                },
            ),
        ],
        cwd="/work/space",
    )

    assert [e.data["paths"] for e in events if e.kind == "FileChange"] == [["/work/space/src/a.py"]]


def test_it_reads_exit_codes_from_error_text():
    assert exit_code_of_error("Exit code 2\nls: cannot access") == 2
    assert exit_code_of_error("Error: Exit code 127\nnope: not found") == 127
    assert exit_code_of_error("Output redirection was blocked") is None
