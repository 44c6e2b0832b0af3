"""Aider's turn read from its side files (LLM history, chat history, analytics log) and the
workspace, on files recorded from the real Aider (fixtures/aider_tool_turn/, captured by
test_aider_cli.py) and a few pieces written by hand."""

from __future__ import annotations

import shutil
from pathlib import Path

from runner.core.transcript import TurnTranscript
from runner.harnesses.aider.harness import (
    ANALYTICS,
    CHAT_HISTORY,
    LLM_HISTORY,
    AiderTurnParser,
    changed_files,
    declined_shell_commands,
    replies_in_llm_history,
    usage_in_analytics,
    workspace_state,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def transcript(events) -> TurnTranscript:
    turn = TurnTranscript(index=0, prompt="")
    for event in events:
        turn.add(event)
    return turn


def test_it_reads_a_recorded_editing_turn(tmp_path):
    state, workspace = tmp_path / "state", tmp_path / "workspace"
    state.mkdir()
    workspace.mkdir()
    (workspace / "app.py").write_text("print('hi')\n")
    parser = AiderTurnParser(state_dir=state, host_workspace=workspace, workspace="/work")
    # The turn: Aider writes its side files, and its edit lands in the workspace.
    for name in (LLM_HISTORY, CHAT_HISTORY, ANALYTICS):
        shutil.copy(FIXTURES / "aider_tool_turn" / name, state / name)
    (workspace / "hello.txt").write_text("hi\n")
    (workspace / ".aider.tags.cache.v4").mkdir()
    (workspace / ".aider.tags.cache.v4" / "cache.db").write_text("Aider's own")
    for line in (FIXTURES / "aider_tool_turn" / "stdout.txt").read_text().splitlines():
        assert parser.feed(line) == []

    turn = transcript(parser.finish())

    assert [m["text"] for m in turn.messages] == [parser.answer]
    assert (
        parser.answer.startswith("I'll create the file.")
        and "```bash\ncat hello.txt\nls /nope\n```" in parser.answer
    )
    assert turn.file_changes == ["/work/hello.txt"]
    assert [(c["name"], c["input"], c["status"]) for c in turn.tool_calls] == [
        ("shell", "cat hello.txt\nls /nope", "declined")
    ]
    assert [d["input"] for d in parser.permission_denials] == ["cat hello.txt\nls /nope"]
    assert turn.commands == []
    assert parser.usage == {
        "input_tokens": 100,
        "output_tokens": 20,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "total_tokens": 120,
    }
    assert (parser.finish_reason, parser.session_id) == ("completed", None)


def test_it_reads_only_what_the_turn_added_to_the_side_files(tmp_path):
    (tmp_path / "llm.history.txt").write_text(
        "LLM RESPONSE 2026-01-01T10:00:00\nASSISTANT Earlier turn.\n"
    )
    (tmp_path / "workspace").mkdir()
    parser = AiderTurnParser(
        state_dir=tmp_path, host_workspace=tmp_path / "workspace", workspace="/work"
    )
    with (tmp_path / "llm.history.txt").open("a") as file:
        file.write(
            "TO LLM 2026-01-01T10:01:00\n-------\nUSER question\nLLM RESPONSE 2026-01-01T10:01:05\n"
            "ASSISTANT First line.\nASSISTANT \nASSISTANT Second paragraph.\n"
        )

    events = parser.finish()

    assert [(e.kind, e.data.get("text")) for e in events] == [
        ("Message", "First line.\n\nSecond paragraph.")
    ]


def test_it_ends_with_the_error_aider_printed_when_no_reply_came(tmp_path):
    parser = AiderTurnParser(state_dir=tmp_path, host_workspace=tmp_path, workspace="/work")
    for line in [
        "Aider v0.86.2",
        "litellm.BadRequestError: OpenAIException - The model x does not exist.",
        "",
    ]:
        parser.feed(line)

    assert parser.finish() == []
    assert (
        parser.finish_reason
        == "error: litellm.BadRequestError: OpenAIException - The model x does not exist."
    )


def test_it_leaves_the_finish_to_the_exit_code_when_nothing_explains_it(tmp_path):
    parser = AiderTurnParser(state_dir=tmp_path, host_workspace=tmp_path, workspace="/work")

    assert parser.finish() == [] and parser.finish_reason is None


def test_it_finds_every_reply_of_a_turn_with_a_retry():
    text = (
        "LLM RESPONSE 2026-01-01T10:00:00\nASSISTANT Bad edit.\n"
        "TO LLM 2026-01-01T10:00:01\nSYSTEM fix it\n"
        "LLM RESPONSE 2026-01-01T10:00:02\nASSISTANT Good edit.\n"
        "LLM RESPONSE 2026-01-01T10:00:03\n"
    )

    assert replies_in_llm_history(text) == ["Bad edit.", "Good edit."]


def test_it_finds_the_shell_commands_aider_asked_about():
    history = "\n".join(
        [
            "> Applied edit to hello.txt  ",
            "> pytest -q  ",
            "> Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]: n  ",
            "> npm install       ",
            "npm test  ",
            "> Run shell commands? (Y)es/(N)o/(S)kip all/(D)on't ask again [Yes]: n  ",
        ]
    )

    assert declined_shell_commands(history) == [("pytest -q", "n"), ("npm install\nnpm test", "n")]


def test_it_adds_up_the_tokens_of_every_model_call():
    log = "\n".join(
        [
            '{"event": "message_send_starting", "properties": {}}',
            '{"event": "message_send", "properties": {"prompt_tokens": 100, "completion_tokens": 20}}',
            "not json",
            '{"event": "message_send", "properties": {"prompt_tokens": 50, "completion_tokens": 5}}',
        ]
    )

    assert usage_in_analytics(log) == {
        "input_tokens": 150,
        "output_tokens": 25,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "total_tokens": 175,
    }
    assert usage_in_analytics('{"event": "exit"}') is None


def test_it_lists_files_added_changed_and_removed(tmp_path):
    (tmp_path / "keep.txt").write_text("same")
    (tmp_path / "edit.txt").write_text("old")
    (tmp_path / "gone.txt").write_text("bye")
    (tmp_path / ".git").mkdir()
    before = workspace_state(tmp_path)
    (tmp_path / "edit.txt").write_text("newer")
    (tmp_path / "gone.txt").unlink()
    (tmp_path / "new.txt").write_text("hi")
    (tmp_path / ".git" / "index").write_text("git's own")

    assert changed_files(before, workspace_state(tmp_path)) == ["edit.txt", "gone.txt", "new.txt"]
