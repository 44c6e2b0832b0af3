"""The claude-code harness against the real Claude Code CLI and a fake Anthropic API on loopback:
a tool-using turn, a resumed follow-up, plan mode with its plan file, refused actions."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fakes.anthropic_api import (  # noqa: F401
    USAGE_PER_CALL,
    FakeAnthropicServer,
    anthropic_server_fixture,
    tool_use,
    write_plan_where_told,
)
from fakes.openai_server import Reply

from harnesses.agent_cli_runs import CliTrial, commands, require_cli
from proctor import profile, variant
from runner.conversation.driver import PLAN_APPROVAL, drive_conversation

MODEL = "claude-fake-1"
PLAN = "# Plan\n\n1. Create hello.txt.\n"
PER_CALL_INPUT = sum(
    USAGE_PER_CALL[k]
    for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
)

# A project hook that is not under test: it would leave a marker if it ran.
PROJECT_HOOK = json.dumps(
    {
        "hooks": {
            "PreToolUse": [
                {
                    "matcher": "*",
                    "hooks": [
                        {"type": "command", "command": 'touch "$CLAUDE_PROJECT_DIR/hook-ran"'}
                    ],
                }
            ]
        }
    }
)


def claude_variant(server: FakeAnthropicServer, **options):
    env = {
        "ANTHROPIC_BASE_URL": server.root_url,
        "ANTHROPIC_API_KEY": "test-key",
        "PATH": require_cli("claude"),
    }
    return variant("claude-code", model=MODEL, profile=profile("claude", env=env), **options)


@pytest.fixture
def make_trial() -> Iterator:
    trials: list[CliTrial] = []

    def make(v, **kwargs) -> CliTrial:
        trial = CliTrial(v, **kwargs)
        trials.append(trial)
        return trial

    yield make
    for trial in trials:
        trial.destroy()


def test_it_turns_a_tool_using_turn_into_the_transcript(
    anthropic_server: FakeAnthropicServer, make_trial, monkeypatch
):
    monkeypatch.setenv("PROCTOR_TEST_CLAUDE_KEY", "key-from-the-worker")
    v = claude_variant(anthropic_server)
    v = variant(
        "claude-code",
        model=MODEL,
        profile=profile(
            "claude", env={**v.profile.env, "ANTHROPIC_API_KEY": "${PROCTOR_TEST_CLAUDE_KEY}"}
        ),
    )
    trial = make_trial(v, workspace_files={".claude/settings.json": PROJECT_HOOK})
    notes = f"{trial.sandbox.workspace}/notes.md"
    anthropic_server.script(
        tool_use(
            "Bash",
            {"command": "echo hi > hello.txt && cat hello.txt", "description": "create hello.txt"},
        ),
        tool_use("Bash", {"command": "ls /nope"}),
        tool_use("Write", {"file_path": notes, "content": "# Notes\n"}, text="Writing notes."),
        "Done: hello.txt holds hi.",
    )

    result = trial.send("Create hello.txt containing hi.")
    trial.record("claude_tool_turn")

    turn = trial.turn(0)
    assert result.finish_reason == "completed" and result.exit_code == 0
    assert commands(turn) == [("echo hi > hello.txt && cat hello.txt", 0), ("ls /nope", 2)]
    assert turn.commands[0]["output"] == "hi"
    assert "No such file or directory" in turn.commands[1]["output"]
    assert [(c["name"], c["status"]) for c in turn.tool_calls] == [
        ("Bash", "completed"),
        ("Bash", "error"),
        ("Write", "completed"),
    ]
    assert json.loads(turn.tool_calls[2]["input"]) == {"file_path": notes, "content": "# Notes\n"}
    # The write tool is reported by the CLI; the shell's hello.txt by the workspace compare.
    assert turn.file_changes == [notes, notes.replace("notes.md", "hello.txt")]
    assert [m["text"] for m in turn.messages] == ["Writing notes.", "Done: hello.txt holds hi."]
    assert turn.usage == {
        "input_tokens": 4 * PER_CALL_INPUT,
        "output_tokens": 4 * USAGE_PER_CALL["output_tokens"],
        "cache_read_tokens": 4 * USAGE_PER_CALL["cache_read_input_tokens"],
        "cache_write_tokens": 4 * USAGE_PER_CALL["cache_creation_input_tokens"],
    }
    started = trial.events(0)[0]
    assert started.kind == "Started" and started.data == {
        "session_id": result.session_id,
        "model": MODEL,
    }
    assert trial.kinds(0)[-3:] == ["Usage", "FileChange", "Finished"]
    assert (trial.workspace / "hello.txt").read_text() == "hi\n"
    # The key came from the worker's environment by name; the project's hook was not loaded.
    assert {r.headers.get("x-api-key") for r in anthropic_server.requests_to("/v1/messages")} == {
        "key-from-the-worker"
    }
    assert not (trial.workspace / "hook-ran").exists()
    assert anthropic_server.unused() == 0


def test_it_loads_project_settings_when_the_variant_opts_in(
    anthropic_server: FakeAnthropicServer, make_trial
):
    trial = make_trial(
        claude_variant(anthropic_server, project_settings=True),
        workspace_files={".claude/settings.json": PROJECT_HOOK},
    )
    anthropic_server.script(tool_use("Bash", {"command": "true"}), "Done.")

    trial.send("Run true.")

    assert (trial.workspace / "hook-ran").exists()


def test_it_resumes_the_same_session_on_a_follow_up_turn(
    anthropic_server: FakeAnthropicServer, make_trial
):
    trial = make_trial(claude_variant(anthropic_server))
    anthropic_server.script(
        tool_use("Bash", {"command": "echo one > first.txt"}),
        "First file written.",
        tool_use("Bash", {"command": "cat first.txt"}),
        "It says one.",
    )

    first = trial.send("Write first.txt.")
    second = trial.send("What does first.txt say?")
    trial.record("claude_resumed_turn", index=1)

    assert second.session_id == first.session_id
    assert trial.session.session_id == first.session_id
    assert [e.data["session_id"] for e in trial.events(1) if e.kind == "Started"] == [
        first.session_id
    ]
    # The follow-up carried the first turn's history, and its usage is its own two calls.
    follow_up = anthropic_server.agent_calls()[2]
    assert "Write first.txt." in json.dumps(follow_up["messages"])
    assert trial.turn(1).usage["output_tokens"] == 2 * USAGE_PER_CALL["output_tokens"]
    assert commands(trial.turn(1)) == [("cat first.txt", 0)]
    assert trial.turn(1).answer == "It says one."


def test_it_plans_in_plan_mode_then_implements_after_approval(
    anthropic_server: FakeAnthropicServer, make_trial
):
    trial = make_trial(claude_variant(anthropic_server))
    anthropic_server.script(
        write_plan_where_told(PLAN),
        "My plan is ready.",
        tool_use("Bash", {"command": "echo hi > hello.txt"}),
        "Implemented.",
    )

    outcome = drive_conversation(
        trial.session,
        opening_prompt="Plan how to create hello.txt.",
        plan_mode=True,
        plan_file=trial.harness.plan_file(trial.sandbox),
    )
    trial.record("claude_plan_turn", index=0)

    assert outcome.plan == PLAN
    assert (outcome.plan_state, outcome.plan_signal, outcome.approval_round) == (
        "approved",
        "plan_file",
        1,
    )
    planning, approval = trial.turn(0), trial.turn(1)
    assert (planning.mode, approval.mode, approval.prompt) == ("plan", "act", PLAN_APPROVAL)
    assert (
        planning.file_changes[0].endswith(".md") and "/.claude/plans/" in planning.file_changes[0]
    )
    assert commands(approval) == [("echo hi > hello.txt", 0)]
    assert (trial.workspace / "hello.txt").exists()
    calls = anthropic_server.agent_calls()
    assert "Plan mode is active" in json.dumps(calls[0]["messages"])
    assert "Exited Plan Mode" in json.dumps(calls[2]["messages"])
    assert trial.session.last_result.session_id == trial.events(0)[0].data["session_id"]


def test_it_reports_actions_the_cli_refused(anthropic_server: FakeAnthropicServer, make_trial):
    trial = make_trial(claude_variant(anthropic_server, permission_mode="default"))
    target = f"{trial.sandbox.workspace}/g.txt"
    anthropic_server.script(
        tool_use("Write", {"file_path": target, "content": "g"}), "I was not allowed."
    )

    result = trial.send("Write g.txt.")
    trial.record("claude_refused_turn")

    assert [
        (d["tool"], json.loads(d["input"])["file_path"]) for d in result.permission_denials
    ] == [("Write", target)]
    assert [(d["tool"], d["turn"]) for d in trial.session.denials] == [("Write", 0)]
    assert trial.turn(0).file_changes == []
    assert not (trial.workspace / "g.txt").exists()


def test_it_ends_a_turn_the_model_api_refused_with_its_error(
    anthropic_server: FakeAnthropicServer, make_trial
):
    trial = make_trial(claude_variant(anthropic_server))
    anthropic_server.script(
        Reply(
            status=400,
            body={
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "prompt is too long"},
            },
        )
    )

    result = trial.send("Do something.")
    trial.record("claude_api_error")

    assert result.finish_reason.startswith("error: Prompt is too long")
    assert result.exit_code == 1
    assert trial.turn(0).messages == [] and result.answer == ""
    assert trial.turn(0).finish_reason == result.finish_reason
