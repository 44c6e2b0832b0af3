"""The opencode harness against the real OpenCode CLI and a fake OpenAI Chat Completions API on
loopback (OpenCode's openai-compatible provider): a tool-using turn, a resumed follow-up, plan
mode with its plan file, refused actions."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator

import pytest
from fakes.chat_stream import USAGE_PER_CALL, FakeChatServer, chat_server_fixture, tool_call  # noqa: F401
from fakes.openai_server import Reply

from harnesses.agent_cli_runs import CliTrial, commands, require_cli
from proctor import profile, variant
from runner.conversation.driver import PLAN_APPROVAL, drive_conversation

MODEL = "fake/fake-model"
# A project setting that is not under test: loaded, it would refuse every echo command.
PROJECT_CONFIG = json.dumps({"permission": {"bash": {"*": "allow", "echo *": "deny"}}})


def provider_config(server: FakeChatServer) -> str:
    return json.dumps(
        {
            "provider": {
                "fake": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Fake",
                    "options": {"baseURL": server.url, "apiKey": "{env:FAKE_PROVIDER_KEY}"},
                    "models": {"fake-model": {"name": "Fake model"}},
                }
            }
        }
    )


def opencode_variant(server: FakeChatServer, key: str = "test-key", **options):
    env = {
        "OPENCODE_CONFIG_CONTENT": provider_config(server),
        "FAKE_PROVIDER_KEY": key,
        "PATH": require_cli("opencode"),
    }
    return variant("opencode", model=MODEL, profile=profile("opencode", env=env), **options)


def bash(command: str, **kwargs):
    return tool_call("bash", {"command": command, "description": "run it"}, **kwargs)


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
    chat_server: FakeChatServer, make_trial, monkeypatch
):
    monkeypatch.setenv("PROCTOR_TEST_OPENCODE_KEY", "key-from-the-worker")
    trial = make_trial(
        opencode_variant(chat_server, key="$PROCTOR_TEST_OPENCODE_KEY"),
        workspace_files={"opencode.json": PROJECT_CONFIG},
        system_prompt="Answer in English.",
    )
    notes = f"{trial.sandbox.workspace}/notes.md"
    chat_server.script(
        bash("echo hi > hello.txt && cat hello.txt"),
        bash("echo oops; exit 3"),
        tool_call("write", {"filePath": notes, "content": "# Notes\n"}, text="Writing notes."),
        "Done: hello.txt holds hi.",
    )

    result = trial.send("-Create hello.txt containing hi.")
    trial.record("opencode_tool_turn")

    turn = trial.turn(0)
    assert result.finish_reason == "completed" and result.exit_code == 0
    assert commands(turn) == [("echo hi > hello.txt && cat hello.txt", 0), ("echo oops; exit 3", 3)]
    assert [c["output"] for c in turn.commands] == ["hi\n", "oops\n"]
    assert [(c["name"], c["status"]) for c in turn.tool_calls] == [
        ("bash", "completed"),
        ("bash", "completed"),
        ("write", "completed"),
    ]
    assert json.loads(turn.tool_calls[2]["input"]) == {"filePath": notes, "content": "# Notes\n"}
    # The write tool is reported by the CLI; the shell's hello.txt by the workspace compare.
    assert turn.file_changes == [notes, notes.replace("notes.md", "hello.txt")]
    assert [m["text"] for m in turn.messages] == ["Writing notes.", "Done: hello.txt holds hi."]
    # Four model steps, each reported on its own and added up for the turn.
    assert turn.usage == {
        "input_tokens": 4 * USAGE_PER_CALL["prompt_tokens"],
        "output_tokens": 4 * USAGE_PER_CALL["completion_tokens"],
        "cache_read_tokens": 4 * USAGE_PER_CALL["cached_tokens"],
        "cache_write_tokens": 0,
    }
    assert trial.kinds(0).count("Usage") == 4
    started = trial.events(0)[0]
    assert started.kind == "Started" and started.data == {
        "session_id": result.session_id,
        "model": MODEL,
    }
    assert result.session_id.startswith("ses_")
    assert trial.kinds(0)[-1] == "Finished"
    assert (trial.workspace / "hello.txt").read_text() == "hi\n"
    calls = chat_server.agent_calls()
    # The prompt arrived whole, the suite's system prompt with it, the key by name.
    assert "-Create hello.txt containing hi." in json.dumps(calls[0]["messages"])
    assert "Answer in English." in json.dumps(calls[0]["messages"])
    assert {r.headers.get("authorization") for r in chat_server.requests} >= {
        "Bearer key-from-the-worker"
    }
    assert chat_server.unused() == 0


def test_it_loads_project_settings_when_the_variant_opts_in_and_reports_what_they_refused(
    chat_server: FakeChatServer,
    make_trial,
):
    trial = make_trial(
        opencode_variant(chat_server, project_settings=True),
        workspace_files={"opencode.json": PROJECT_CONFIG},
    )
    chat_server.script(bash("echo hi > hello.txt"), "I was not allowed.")

    result = trial.send("Create hello.txt.")
    trial.record("opencode_refused_turn")

    turn = trial.turn(0)
    assert [(c["name"], c["status"]) for c in turn.tool_calls] == [("bash", "error")]
    assert turn.commands == []  # refused before it ran
    assert [(d["tool"], json.loads(d["input"])["command"]) for d in result.permission_denials] == [
        ("bash", "echo hi > hello.txt")
    ]
    assert [(d["tool"], d["turn"]) for d in trial.session.denials] == [("bash", 0)]
    assert not (trial.workspace / "hello.txt").exists()


def test_it_resumes_the_same_session_on_a_follow_up_turn(chat_server: FakeChatServer, make_trial):
    trial = make_trial(opencode_variant(chat_server))
    chat_server.script(
        bash("echo one > first.txt"),
        "First file written.",
        bash("cat first.txt"),
        "It says one.",
    )

    first = trial.send("Write first.txt.")
    second = trial.send("What does first.txt say?")
    trial.record("opencode_resumed_turn", index=1)

    assert second.session_id == first.session_id
    assert [e.data["session_id"] for e in trial.events(1) if e.kind == "Started"] == [
        first.session_id
    ]
    assert "Write first.txt." in json.dumps(chat_server.agent_calls()[2]["messages"])
    assert trial.turn(1).usage["input_tokens"] == 2 * USAGE_PER_CALL["prompt_tokens"]
    assert commands(trial.turn(1)) == [("cat first.txt", 0)]
    assert trial.turn(1).answer == "It says one."


def _write_plan_where_told(body):
    """The model's side of plan mode: write the plan to the file the CLI names."""
    match = re.search(r"(/[^\s\"\\]*/\.opencode/plans/[\w.-]+\.md)", json.dumps(body["messages"]))
    assert match, "the planning request names a plan file"
    return tool_call(
        "write", {"filePath": match.group(1), "content": "# Plan\n\n1. Create hello.txt.\n"}
    )(body)


def test_it_plans_in_plan_mode_then_implements_after_approval(
    chat_server: FakeChatServer, make_trial
):
    trial = make_trial(opencode_variant(chat_server))
    subprocess.run(["git", "init", "--quiet", trial.sandbox.workspace], check=True)
    stray = f"{trial.sandbox.workspace}/early.txt"
    chat_server.script(
        tool_call("write", {"filePath": stray, "content": "too early\n"}),
        _write_plan_where_told,
        "My plan is ready.",
        bash("echo hi > hello.txt"),
        "Implemented.",
    )

    outcome = drive_conversation(
        trial.session,
        opening_prompt="Plan how to create hello.txt.",
        plan_mode=True,
        plan_file=trial.harness.plan_file(trial.sandbox),
    )
    trial.record("opencode_plan_turn", index=0)

    assert outcome.plan == "# Plan\n\n1. Create hello.txt.\n"
    assert (outcome.plan_state, outcome.plan_signal, outcome.approval_round) == (
        "approved",
        "plan_file",
        1,
    )
    planning, approval = trial.turn(0), trial.turn(1)
    assert (planning.mode, approval.mode, approval.prompt) == ("plan", "act", PLAN_APPROVAL)
    assert [(c["name"], c["status"]) for c in planning.tool_calls] == [
        ("write", "error"),
        ("write", "completed"),
    ]
    assert "/.opencode/plans/" in planning.file_changes[0]
    assert [
        (d["tool"], json.loads(d["input"])["filePath"], d["plan_mode_attributed"])
        for d in trial.session.denials
    ] == [("write", stray, True)]
    assert not (trial.workspace / "early.txt").exists()
    assert commands(approval) == [("echo hi > hello.txt", 0)]
    assert (trial.workspace / "hello.txt").exists()
    assert trial.session.last_result.session_id == trial.events(0)[0].data["session_id"]
    calls = chat_server.agent_calls()
    assert "Plan mode is active" in json.dumps(calls[0]["messages"])


def test_it_ends_a_turn_the_model_api_refused_with_its_error(
    chat_server: FakeChatServer, make_trial
):
    trial = make_trial(opencode_variant(chat_server))
    chat_server.script(
        Reply(
            status=400,
            body={
                "error": {
                    "message": "This model's maximum context length is exceeded.",
                    "type": "invalid_request_error",
                }
            },
        )
    )

    result = trial.send("Do something.")
    trial.record("opencode_api_error")

    assert result.finish_reason == "error: This model's maximum context length is exceeded."
    assert trial.turn(0).messages == [] and result.answer == ""
