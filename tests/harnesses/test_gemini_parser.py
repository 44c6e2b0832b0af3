"""Gemini CLI's stream-json output turned into Proctor events, on lines recorded from the real
CLI (fixtures/gemini_*.jsonl and the session log beside them, captured by test_gemini_cli.py)
and a few written by hand for cases a fake server cannot provoke."""

from __future__ import annotations

import json
from pathlib import Path

from proctor.agent_events import AgentEvent
from runner.core.transcript import TurnTranscript
from runner.harnesses.gemini.session_log import session_tool_outputs
from runner.harnesses.gemini.settings import workspace_hook_names
from runner.harnesses.gemini.stream import (
    GeminiStreamParser,
    api_error_message,
    shell_exit_code,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def fixture(name: str) -> list[str]:
    return (FIXTURES / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()


def parse(
    lines: list[str], outputs: dict[str, str] | None = None
) -> tuple[GeminiStreamParser, list[AgentEvent]]:
    parser = GeminiStreamParser(cwd="/work", tool_outputs=lambda _session, _ids: outputs or {})
    events = [event for line in lines for event in parser.feed(line)]
    return parser, events + parser.finish()


def transcript(events: list[AgentEvent]) -> TurnTranscript:
    turn = TurnTranscript(index=0, prompt="")
    for event in events:
        turn.add(event)
    return turn


def line(**obj) -> str:
    return json.dumps(obj)


def test_it_reads_a_recorded_tool_using_turn_with_exit_codes_from_the_session_log():
    lines = fixture("gemini_tool_turn")
    init = json.loads(lines[0])
    outputs = session_tool_outputs([FIXTURES / "gemini_tool_turn.session.jsonl"])
    parser, events = parse(lines, outputs)
    shell_ids = {json.loads(text)["tool_id"] for text in lines if '"run_shell_command"' in text}
    assert (
        session_tool_outputs([FIXTURES / "gemini_tool_turn.session.jsonl"], shell_ids).keys()
        == shell_ids
    )
    turn = transcript(events)

    assert events[0].kind == "Started"
    assert events[0].data == {"session_id": init["session_id"], "model": "gemini-2.5-pro"}
    assert [(c["command"], c["exit_code"], c["output"]) for c in turn.commands] == [
        ("echo hi > hello.txt && cat hello.txt", 0, "hi"),
        ("echo oops; exit 3", 3, "oops"),
    ]
    assert [(c["name"], c["status"]) for c in turn.tool_calls] == [
        ("run_shell_command", "completed"),
        ("run_shell_command", "completed"),
        ("write_file", "completed"),
    ]
    assert len(turn.file_changes) == 1 and turn.file_changes[0].endswith("/notes.md")
    assert [m["text"] for m in turn.messages] == ["Writing notes.", "Done: hello.txt holds hi."]
    # Events keep the order things happened in, though exit codes arrive late.
    assert [e.kind for e in events] == [
        "Started",
        "ToolCall",
        "Command",
        "ToolCall",
        "Command",
        "Message",
        "ToolCall",
        "FileChange",
        "Message",
        "Usage",
    ]
    assert parser.usage == {
        "input_tokens": 800,
        "output_tokens": 160,
        "cache_read_tokens": 200,
        "cache_write_tokens": 0,
        "total_tokens": 960,
    }
    assert (parser.answer, parser.finish_reason, parser.permission_denials) == (
        "Done: hello.txt holds hi.",
        "completed",
        [],
    )


def test_it_leaves_an_exit_code_unknown_when_the_session_log_lacks_it():
    parser, events = parse(fixture("gemini_tool_turn"), outputs={})

    assert [c["exit_code"] for c in transcript(events).commands] == [None, None]


def test_it_waits_for_no_exit_code_when_the_session_keeps_no_log():
    parser = GeminiStreamParser(tool_outputs=lambda _session, _ids: None)
    emitted = []
    for text in fixture("gemini_tool_turn")[:5]:
        emitted += parser.feed(text)

    assert [(e.kind, e.data.get("exit_code")) for e in emitted if e.kind == "Command"] == [
        ("Command", None)
    ]


def test_it_holds_events_after_a_command_until_the_log_knows_its_exit_code():
    outputs: dict[str, str] = {}
    parser = GeminiStreamParser(tool_outputs=lambda _session, _ids: outputs)
    emitted = []
    for text in [
        line(type="init", session_id="s-1", model="m"),
        line(
            type="tool_use",
            tool_name="run_shell_command",
            tool_id="t1",
            parameters={"command": "false"},
        ),
        line(type="tool_result", tool_id="t1", status="success", output=""),
        line(type="message", role="assistant", content="It failed.", delta=True),
    ]:
        emitted += parser.feed(text)
    assert [e.kind for e in emitted] == ["Started", "ToolCall"]

    outputs["t1"] = "Output: (empty)\nExit Code: 1\nProcess Group PGID: 7"
    emitted += parser.feed(line(type="result", status="success", stats={}))
    assert [(e.kind, e.data.get("exit_code")) for e in emitted[2:]] == [
        ("Command", 1),
        ("Message", None),
        ("Usage", None),
    ]


def test_it_reads_a_recorded_planning_turn_and_the_write_it_refused():
    parser, events = parse(fixture("gemini_plan_turn"))
    turn = transcript(events)

    assert [(c["name"], c["status"]) for c in turn.tool_calls] == [
        ("write_file", "error"),
        ("write_file", "completed"),
        ("exit_plan_mode", "error"),
    ]
    assert turn.tool_calls[0]["error"].startswith("Access denied")
    assert [d["tool"] for d in parser.permission_denials] == ["write_file"]
    assert json.loads(parser.permission_denials[0]["input"])["file_path"].endswith("/early.txt")
    # A tool the mode does not offer is an error of the model, not a refusal.
    assert "not found" in turn.tool_calls[2]["error"]
    assert turn.file_changes[0].endswith("/plans/hello-plan.md")
    assert parser.answer == "My plan is ready."


def test_it_reads_a_recorded_resumed_turn():
    lines = fixture("gemini_resumed_turn")
    parser, events = parse(
        lines, {json.loads(lines[2])["tool_id"]: "Output: one\nProcess Group PGID: 9"}
    )

    assert parser.session_id == json.loads(lines[0])["session_id"]
    assert [(c["command"], c["exit_code"]) for c in transcript(events).commands] == [
        ("cat first.txt", 0)
    ]
    assert parser.answer == "It says one."
    assert parser.usage["input_tokens"] == 400


def test_it_reads_a_recorded_api_error():
    parser, events = parse(fixture("gemini_api_error"))

    assert parser.finish_reason == "error: The input token count exceeds the limit."
    assert [e.kind for e in events] == ["Started", "Usage"]
    assert parser.answer == ""


def test_it_joins_streamed_text_into_one_message_and_skips_unknown_lines():
    parser, events = parse(
        [
            line(type="init", session_id="s-1", model="m"),
            line(type="message", role="user", content="Hi"),
            line(type="message", role="assistant", content="Hel", delta=True),
            line(type="future_event", anything=1),
            "not json at all",
            line(type="message", role="assistant", content="lo.", delta=True),
            line(type="error", severity="warning", message="Loop detected"),
        ]
    )

    assert [(e.kind, e.data.get("text")) for e in events] == [
        ("Started", None),
        ("Message", "Hello."),
        ("Log", "warning: Loop detected"),
    ]
    assert parser.finish_reason is None  # no result line: the process exit decides


def test_it_marks_a_tool_call_without_a_result_incomplete_when_the_run_ends():
    _, events = parse(
        [
            line(type="init", session_id="s-1", model="m"),
            line(
                type="tool_use",
                tool_name="run_shell_command",
                tool_id="t1",
                parameters={"command": "sleep 99"},
            ),
        ]
    )

    assert [(e.kind, e.data.get("status")) for e in events] == [
        ("Started", None),
        ("ToolCall", "incomplete"),
    ]


def test_it_counts_a_policy_refusal_as_a_permission_denial():
    parser, events = parse(
        [
            line(
                type="tool_use",
                tool_name="web_fetch",
                tool_id="t1",
                parameters={"prompt": "http://x"},
            ),
            line(
                type="tool_result",
                tool_id="t1",
                status="error",
                output="Tool execution denied by policy.",
                error={"type": "policy_violation", "message": "Tool execution denied by policy."},
            ),
        ]
    )

    assert parser.permission_denials == [
        {
            "tool": "web_fetch",
            "input": '{"prompt": "http://x"}',
            "call_id": "t1",
            "reason": "Tool execution denied by policy.",
        }
    ]
    assert transcript(events).commands == []


def test_it_reads_exit_codes_the_way_the_cli_writes_them():
    assert shell_exit_code("Output: hi\nProcess Group PGID: 1") == 0
    assert (
        shell_exit_code(
            "<untrusted_context>\nOutput: x\nExit Code: 127\nProcess Group PGID: 1\n</untrusted_context>"
        )
        == 127
    )
    assert shell_exit_code("Output: (empty)\nSignal: 9\nProcess Group PGID: 1") is None
    assert shell_exit_code("Command was cancelled by user before it could complete.") is None


def test_it_unwraps_the_apis_own_error_message():
    assert (
        api_error_message('[API Error: {"error":{"code":429,"message":"Quota exceeded."}}]')
        == "Quota exceeded."
    )
    assert api_error_message("Something else broke") == "Something else broke"


def test_it_names_the_hooks_a_workspace_declares(tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "hooks": {
                    "BeforeTool": [
                        {
                            "matcher": ".*",
                            "hooks": [
                                {"type": "command", "command": "./audit.sh"},
                                {"type": "command", "name": "lint", "command": "npm run lint"},
                            ],
                        }
                    ],
                    "AfterAgent": [{"hooks": [{"type": "command", "command": "./audit.sh"}]}],
                }
            }
        )
    )

    assert workspace_hook_names(settings) == ["./audit.sh", "lint"]
    assert workspace_hook_names(tmp_path / "missing.json") == []
