"""The codex harness against the real Codex CLI and a fake OpenAI Responses API on loopback: a
tool-using turn, and a resumed follow-up whose usage is its own although Codex reports it
cumulative for the thread."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fakes.openai_responses import (  # noqa: F401
    USAGE_PER_CALL,
    FakeResponsesServer,
    responses_server_fixture,
    shell,
)
from fakes.openai_server import Reply

from harnesses.agent_cli_runs import CliTrial, commands, require_cli
from proctor import profile, variant

MODEL = "gpt-fake-codex"
PATCH = "*** Begin Patch\n*** Add File: notes.md\n+# Notes\n*** End Patch\n"


def usage_of_calls(count: int) -> dict[str, int]:
    return {
        "input_tokens": count * USAGE_PER_CALL["input_tokens"],
        "output_tokens": count * USAGE_PER_CALL["output_tokens"],
        "cache_read_tokens": count * USAGE_PER_CALL["cached_tokens"],
        "cache_write_tokens": 0,
    }


def codex_variant(server: FakeResponsesServer, **options):
    env = {
        "OPENAI_BASE_URL": server.url,
        "OPENAI_API_KEY": "$PROCTOR_TEST_OPENAI_KEY",
        "PATH": require_cli("codex"),
    }
    return variant("codex", model=MODEL, profile=profile("codex", env=env), **options)


@pytest.fixture
def codex_trial(responses_server: FakeResponsesServer, monkeypatch) -> Iterator[CliTrial]:
    monkeypatch.setenv("PROCTOR_TEST_OPENAI_KEY", "key-from-the-worker")
    trial = CliTrial(codex_variant(responses_server), system_prompt="Answer in one sentence.")
    yield trial
    trial.destroy()


def test_it_turns_a_tool_using_turn_into_the_transcript(
    responses_server: FakeResponsesServer, codex_trial: CliTrial
):
    responses_server.script(
        shell("echo hi > hello.txt && cat hello.txt"),
        shell("ls /nope"),
        shell(f"apply_patch <<'EOF'\n{PATCH}EOF\n"),
        "Done: hello.txt holds hi.",
    )

    result = codex_trial.send("Create hello.txt containing hi.")
    codex_trial.record("codex_tool_turn")

    turn = codex_trial.turn(0)
    assert result.finish_reason == "completed" and result.exit_code == 0
    assert commands(turn) == [("echo hi > hello.txt && cat hello.txt", 0), ("ls /nope", 2)]
    assert turn.commands[0]["output"] == "hi\n"
    assert "No such file or directory" in turn.commands[1]["output"]
    # Codex reports its patch; the shell's hello.txt comes from the workspace compare.
    assert turn.file_changes == [
        f"{codex_trial.sandbox.workspace}/notes.md",
        f"{codex_trial.sandbox.workspace}/hello.txt",
    ]
    assert (codex_trial.workspace / "notes.md").read_text() == "# Notes\n"
    assert turn.answer == "Done: hello.txt holds hi."
    assert turn.usage == usage_of_calls(4)
    started = codex_trial.events(0)[0]
    assert started.kind == "Started" and started.data == {
        "session_id": result.session_id,
        "model": MODEL,
    }
    assert codex_trial.kinds(0)[-3:] == ["Usage", "FileChange", "Finished"]
    # The profile's provider was used, with the key named from the worker's environment, and
    # the suite's system prompt reached the model as developer instructions.
    requests = responses_server.requests_to("/v1/responses")
    assert {r.headers.get("authorization") for r in requests} == {"Bearer key-from-the-worker"}
    assert "Answer in one sentence." in json.dumps(requests[0].body["input"])
    assert responses_server.unused() == 0


def test_it_resumes_the_thread_and_records_each_turns_own_usage(
    responses_server: FakeResponsesServer, codex_trial: CliTrial
):
    responses_server.script(
        shell("echo one > first.txt"),
        "First file written.",
        shell("cat first.txt"),
        shell("true"),
        "It says one.",
    )

    first = codex_trial.send("Write first.txt.")
    second = codex_trial.send("What does first.txt say?")
    codex_trial.record("codex_first_turn", index=0)
    codex_trial.record("codex_resumed_turn", index=1)

    assert second.session_id == first.session_id
    assert [e.data["session_id"] for e in codex_trial.events(1) if e.kind == "Started"] == [
        first.session_id
    ]
    # Codex reported 5 calls' worth of tokens at the end of the second turn; 3 were its own.
    totals = [
        json.loads(line)["usage"] for line in codex_trial.stdout(1) if '"turn.completed"' in line
    ]
    assert totals[0]["input_tokens"] == 5 * USAGE_PER_CALL["input_tokens"]
    assert codex_trial.turn(0).usage == usage_of_calls(2)
    assert codex_trial.turn(1).usage == usage_of_calls(3)
    assert commands(codex_trial.turn(1)) == [("cat first.txt", 0), ("true", 0)]
    assert codex_trial.turn(1).answer == "It says one."
    follow_up = responses_server.agent_calls()[2]
    assert "Write first.txt." in json.dumps(follow_up["input"])
    # The developer instructions are part of the thread: sent once, not again on resume.
    assert json.dumps(follow_up["input"]).count("Answer in one sentence.") == 1


def test_it_ends_a_turn_the_model_api_refused_with_its_error(
    responses_server: FakeResponsesServer, codex_trial: CliTrial
):
    responses_server.script(
        Reply(
            status=400,
            body={
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long",
                    "code": "context_length_exceeded",
                }
            },
        )
    )

    result = codex_trial.send("Do something.")
    codex_trial.record("codex_turn_failed")

    assert result.finish_reason.startswith(
        "failed: Codex ran out of room in the model's context window"
    )
    assert result.exit_code == 1
    assert codex_trial.turn(0).messages == [] and result.answer == ""
    assert codex_trial.turn(0).finish_reason == result.finish_reason
