"""The gemini harness against the real Gemini CLI and a fake Gemini API on loopback: a
tool-using turn, a resumed follow-up, plan mode with its plan file and the actions it refused."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator

import pytest
from fakes.gemini_api import (  # noqa: F401
    MODEL,
    USAGE_PER_CALL,
    FakeGeminiServer,
    function_call,
    gemini_server_fixture,
    shell,
)

from harnesses.agent_cli_runs import FIXTURES, RECORDING, CliTrial, commands, require_cli
from proctor import profile, variant
from runner.conversation.driver import PLAN_APPROVAL, drive_conversation
from runner.harnesses.gemini.session_log import find_session_logs

# A project hook that is not under test: it would leave a marker if it ran.
PROJECT_HOOK = json.dumps(
    {
        "hooks": {
            "BeforeTool": [
                {
                    "matcher": ".*",
                    "hooks": [
                        {
                            "type": "command",
                            "command": "touch \"$GEMINI_PROJECT_DIR/hook-ran\"; echo '{}'",
                        }
                    ],
                }
            ]
        }
    }
)


def gemini_variant(server: FakeGeminiServer, key: str = "test-key", **options):
    env = {
        "GOOGLE_GEMINI_BASE_URL": server.base_url,
        "GEMINI_API_KEY": key,
        "PATH": require_cli("gemini"),
    }
    return variant("gemini", model=MODEL, profile=profile("gemini", env=env), **options)


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


def record_session_log(trial: CliTrial, name: str, session_id: str) -> None:
    """Keep the session log beside the stream: the parser reads exit codes from it."""
    if RECORDING:
        logs = find_session_logs(trial.sandbox.host_home / ".gemini", session_id)
        assert len(logs) == 1
        shutil.copy(logs[0], FIXTURES / f"{name}.session.jsonl")


def test_it_turns_a_tool_using_turn_into_the_transcript(
    gemini_server: FakeGeminiServer, make_trial, monkeypatch
):
    monkeypatch.setenv("PROCTOR_TEST_GEMINI_KEY", "key-from-the-worker")
    trial = make_trial(
        gemini_variant(gemini_server, key="$PROCTOR_TEST_GEMINI_KEY"),
        workspace_files={".gemini/settings.json": PROJECT_HOOK},
        system_prompt="Answer in English.",
    )
    notes = f"{trial.sandbox.workspace}/notes.md"
    gemini_server.script(
        shell("echo hi > hello.txt && cat hello.txt"),
        shell("echo oops; exit 3"),
        function_call(
            "write_file", {"file_path": notes, "content": "# Notes\n"}, text="Writing notes."
        ),
        "Done: hello.txt holds hi.",
    )

    result = trial.send("-Create hello.txt containing hi.")
    trial.record("gemini_tool_turn")
    record_session_log(trial, "gemini_tool_turn", result.session_id)

    turn = trial.turn(0)
    assert result.finish_reason == "completed" and result.exit_code == 0
    # The failing command's exit code is not in the CLI's stream: it came from its session log.
    assert commands(turn) == [("echo hi > hello.txt && cat hello.txt", 0), ("echo oops; exit 3", 3)]
    assert [c["output"] for c in turn.commands] == ["hi", "oops"]
    assert [(c["name"], c["status"]) for c in turn.tool_calls] == [
        ("run_shell_command", "completed"),
        ("run_shell_command", "completed"),
        ("write_file", "completed"),
    ]
    assert json.loads(turn.tool_calls[2]["input"]) == {"file_path": notes, "content": "# Notes\n"}
    # The write tool is reported by the CLI; the shell's hello.txt by the workspace compare.
    assert turn.file_changes == [notes, notes.replace("notes.md", "hello.txt")]
    assert [m["text"] for m in turn.messages] == ["Writing notes.", "Done: hello.txt holds hi."]
    assert turn.usage == {
        "input_tokens": 4 * USAGE_PER_CALL["promptTokenCount"],
        "output_tokens": 4 * USAGE_PER_CALL["candidatesTokenCount"],
        "cache_read_tokens": 4 * USAGE_PER_CALL["cachedContentTokenCount"],
        "cache_write_tokens": 0,
    }
    started = trial.events(0)[0]
    assert started.kind == "Started" and started.data == {
        "session_id": result.session_id,
        "model": MODEL,
    }
    assert trial.kinds(0)[-3:] == ["Usage", "FileChange", "Finished"]
    assert (trial.workspace / "hello.txt").read_text() == "hi\n"
    calls = gemini_server.agent_calls()
    # The prompt arrived whole, the suite's system prompt as the CLI's memory, the key by name.
    assert "-Create hello.txt containing hi." in json.dumps(calls[0]["contents"])
    assert "Answer in English." in json.dumps(calls[0]["systemInstruction"])
    assert {
        r.headers.get("x-goog-api-key")
        for r in gemini_server.requests_to(gemini_server.stream_route)
    } == {"key-from-the-worker"}
    # The workspace's own hook is not under test: it did not run.
    assert not (trial.workspace / "hook-ran").exists()
    assert gemini_server.unused() == 0


def test_it_runs_the_workspace_hooks_when_the_variant_opts_in(
    gemini_server: FakeGeminiServer, make_trial
):
    trial = make_trial(
        gemini_variant(gemini_server, project_settings=True),
        workspace_files={".gemini/settings.json": PROJECT_HOOK},
    )
    gemini_server.script(shell("true"), "Done.")

    trial.send("Run true.")

    assert (trial.workspace / "hook-ran").exists()


def test_it_resumes_the_same_session_on_a_follow_up_turn(
    gemini_server: FakeGeminiServer, make_trial
):
    trial = make_trial(gemini_variant(gemini_server))
    gemini_server.script(
        shell("echo one > first.txt"),
        "First file written.",
        shell("cat first.txt"),
        "It says one.",
    )

    first = trial.send("Write first.txt.")
    second = trial.send("What does first.txt say?")
    trial.record("gemini_resumed_turn", index=1)

    assert second.session_id == first.session_id
    assert [e.data["session_id"] for e in trial.events(1) if e.kind == "Started"] == [
        first.session_id
    ]
    # The follow-up carried the first turn's history; its usage is its own two calls.
    assert "Write first.txt." in json.dumps(gemini_server.agent_calls()[2]["contents"])
    assert trial.turn(1).usage["input_tokens"] == 2 * USAGE_PER_CALL["promptTokenCount"]
    assert commands(trial.turn(1)) == [("cat first.txt", 0)]
    assert trial.turn(1).answer == "It says one."


def _plans_folder(body) -> str:
    match = re.search(r"(/[^\s\"\\`]*/\.gemini/tmp/[\w-]+/[\w-]+/plans)", json.dumps(body))
    assert match, "the planning request names the plans folder"
    return match.group(1)


def _write_plan_where_told(body):
    """The model's side of plan mode: write the plan into the folder the CLI names."""
    return function_call(
        "write_file",
        {
            "file_path": f"{_plans_folder(body)}/hello-plan.md",
            "content": "# Plan\n\n1. Create hello.txt.\n",
        },
    )


def _leave_plan_mode(body):
    """A model that tries to approve its own plan, as headless Gemini CLI would let it."""
    return function_call("exit_plan_mode", {"plan_path": f"{_plans_folder(body)}/hello-plan.md"})


def test_it_plans_in_plan_mode_then_implements_after_approval(
    gemini_server: FakeGeminiServer, make_trial
):
    trial = make_trial(gemini_variant(gemini_server))
    stray = f"{trial.sandbox.workspace}/early.txt"
    gemini_server.script(
        function_call("write_file", {"file_path": stray, "content": "too early\n"}),
        _write_plan_where_told,
        _leave_plan_mode,
        "My plan is ready.",
        shell("echo hi > hello.txt"),
        "Implemented.",
    )

    outcome = drive_conversation(
        trial.session,
        opening_prompt="Plan how to create hello.txt.",
        plan_mode=True,
        plan_file=trial.harness.plan_file(trial.sandbox),
    )
    trial.record("gemini_plan_turn", index=0)

    assert outcome.plan == "# Plan\n\n1. Create hello.txt.\n"
    assert (outcome.plan_state, outcome.plan_signal, outcome.approval_round) == (
        "approved",
        "plan_file",
        1,
    )
    planning, approval = trial.turn(0), trial.turn(1)
    assert (planning.mode, approval.mode, approval.prompt) == ("plan", "act", PLAN_APPROVAL)
    # While planning: no shell tool, a write outside the plans folder refused, no way out of
    # plan mode (the policy removes exit_plan_mode), and nothing done in the workspace.
    planning_tools = {
        d["name"]
        for t in gemini_server.agent_calls()[0]["tools"]
        for d in t["functionDeclarations"]
    }
    assert "run_shell_command" not in planning_tools and "exit_plan_mode" not in planning_tools
    assert [(c["name"], c["status"]) for c in planning.tool_calls] == [
        ("write_file", "error"),
        ("write_file", "completed"),
        ("exit_plan_mode", "error"),
    ]
    assert planning.file_changes[0].endswith("/plans/hello-plan.md")
    assert [
        (d["tool"], json.loads(d["input"])["file_path"], d["plan_mode_attributed"])
        for d in trial.session.denials
    ] == [("write_file", stray, True)]
    assert not (trial.workspace / "early.txt").exists() and planning.commands == []
    # Approved: the same session implements it.
    assert commands(approval) == [("echo hi > hello.txt", 0)]
    assert (trial.workspace / "hello.txt").exists()
    assert trial.session.last_result.session_id == trial.events(0)[0].data["session_id"]


def test_it_ends_a_turn_the_model_api_refused_with_its_error(
    gemini_server: FakeGeminiServer, make_trial
):
    from fakes.openai_server import Reply

    trial = make_trial(gemini_variant(gemini_server))
    gemini_server.script(
        Reply(
            status=400,
            body={
                "error": {
                    "code": 400,
                    "message": "The input token count exceeds the limit.",
                    "status": "INVALID_ARGUMENT",
                }
            },
        )
    )

    result = trial.send("Do something.")
    trial.record("gemini_api_error")

    assert result.exit_code != 0
    assert result.finish_reason == "error: The input token count exceeds the limit."
    assert trial.turn(0).messages == [] and result.answer == ""
