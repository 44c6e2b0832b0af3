"""The aider harness against the real Aider and a fake OpenAI Chat Completions API on loopback
(through litellm): an editing turn with suggested shell commands, a follow-up that continues the
chat history, a failed model call."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator

import pytest
from conftest import REPO, tier_unavailable
from fakes.chat_stream import USAGE_PER_CALL, FakeChatServer
from fakes.openai_server import Reply

from harnesses.agent_cli_runs import FIXTURES, RECORDING, CliTrial
from proctor import profile, variant
from runner.harnesses.aider.harness import ANALYTICS, CHAT_HISTORY, LLM_HISTORY, STATE_DIR

MODEL = "openai/fake-model"
AIDER_BIN = REPO / ".proctor" / "agent-clis" / "aider-venv" / "bin"

CREATE_HELLO = """I'll create the file.

hello.txt
```
<<<<<<< SEARCH
=======
hi
>>>>>>> REPLACE
```

Then check it:

```bash
cat hello.txt
ls /nope
```
"""


def require_aider() -> str:
    """The PATH that finds aider; skips the agent-clis tier when it is not installed."""
    if not (AIDER_BIN / "aider").exists():
        tier_unavailable("agent-clis", "aider is not installed (run tests/setup/agent-clis.sh)")
    return f"{AIDER_BIN}:/usr/local/bin:/usr/bin:/bin"


def aider_variant(server: FakeChatServer, key: str = "test-key", **options):
    env = {
        "OPENAI_API_BASE": server.url,
        "OPENAI_API_KEY": key,
        "AIDER_EDIT_FORMAT": "diff",
        "PATH": require_aider(),
    }
    return variant("aider", model=MODEL, profile=profile("aider", env=env), **options)


@pytest.fixture
def aider_server() -> Iterator[FakeChatServer]:
    # Aider offers the model no tools: every call is the agent's own.
    with FakeChatServer(side_calls_without_tools=False) as server:
        yield server


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


def git(trial: CliTrial, *args: str) -> str:
    return subprocess.run(
        [
            "git",
            "-C",
            trial.sandbox.workspace,
            "-c",
            "user.name=Alice",
            "-c",
            "user.email=a@example.com",
            *args,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def record(trial: CliTrial, name: str) -> None:
    """Keep what Aider wrote: its stdout and its side files, the parser's fixtures."""
    if RECORDING:
        folder = FIXTURES / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        for side_file in (CHAT_HISTORY, LLM_HISTORY, ANALYTICS):
            shutil.copy(trial.sandbox.host_home / STATE_DIR / side_file, folder / side_file)
        (folder / "stdout.txt").write_text("\n".join(trial.stdout(0)) + "\n", encoding="utf-8")


def test_it_turns_an_editing_turn_into_the_transcript(
    aider_server: FakeChatServer, make_trial, monkeypatch
):
    monkeypatch.setenv("PROCTOR_TEST_AIDER_KEY", "key-from-the-worker")
    trial = make_trial(
        aider_variant(aider_server, key="$PROCTOR_TEST_AIDER_KEY"),
        workspace_files={"app.py": "print('hi')\n"},
        system_prompt="Answer in English.",
    )
    git(trial, "init", "--quiet")
    git(trial, "add", ".")
    git(trial, "commit", "--quiet", "-m", "the app")
    aider_server.script(CREATE_HELLO)

    result = trial.send("-Create hello.txt containing hi.")
    record(trial, "aider_tool_turn")

    turn = trial.turn(0)
    assert result.finish_reason == "completed" and result.exit_code == 0
    assert result.session_id is None  # Aider has none
    assert [m["text"] for m in turn.messages] == [CREATE_HELLO.strip("\n")]
    assert turn.file_changes == [f"{trial.sandbox.workspace}/hello.txt"]
    assert (trial.workspace / "hello.txt").read_text() == "hi\n"
    # Suggested shell commands are declined under --yes-always: shown, refused, never run.
    assert turn.commands == []
    assert [(c["name"], c["input"], c["status"]) for c in turn.tool_calls] == [
        ("shell", "cat hello.txt\nls /nope", "declined")
    ]
    assert [(d["tool"], d["input"]) for d in result.permission_denials] == [
        ("shell", "cat hello.txt\nls /nope")
    ]
    assert [(d["tool"], d["turn"]) for d in trial.session.denials] == [("shell", 0)]
    assert turn.usage == {
        "input_tokens": USAGE_PER_CALL["prompt_tokens"],
        "output_tokens": USAGE_PER_CALL["completion_tokens"],
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
    # Aider committed nothing and left .gitignore alone.
    assert git(trial, "log", "--format=%s").split() == ["the", "app"]
    assert not (trial.workspace / ".gitignore").exists()
    call = aider_server.agent_calls()[0]
    assert "-Create hello.txt containing hi." in json.dumps(call["messages"])
    assert "Answer in English." in json.dumps(call["messages"])
    assert {r.headers.get("authorization") for r in aider_server.requests} == {
        "Bearer key-from-the-worker"
    }


def test_it_continues_the_chat_history_on_a_follow_up_turn(
    aider_server: FakeChatServer, make_trial
):
    trial = make_trial(aider_variant(aider_server))
    aider_server.script("The answer is 42.", "I said 42.")

    first = trial.send("What is the answer?")
    second = trial.send("What did you say?")

    assert (first.answer, second.answer) == ("The answer is 42.", "I said 42.")
    assert trial.turn(1).messages == [{"role": "assistant", "text": "I said 42."}]
    # The follow-up carried the first exchange, restored from Aider's chat history.
    follow_up = json.dumps(aider_server.agent_calls()[1]["messages"])
    assert "What is the answer?" in follow_up and "The answer is 42." in follow_up
    assert trial.turn(1).usage["input_tokens"] == USAGE_PER_CALL["prompt_tokens"]
    # Not a repository: Aider made none.
    assert not (trial.workspace / ".git").exists()


def test_it_ends_a_turn_the_model_api_refused_with_its_error(
    aider_server: FakeChatServer, make_trial
):
    trial = make_trial(aider_variant(aider_server))
    aider_server.script(
        Reply(
            status=400,
            body={
                "error": {
                    "message": "The model fake-model does not exist.",
                    "type": "invalid_request_error",
                }
            },
        )
    )

    result = trial.send("Do something.")

    # Aider exits 0 all the same; its printed error says what happened.
    assert (
        result.finish_reason
        == "error: litellm.BadRequestError: OpenAIException - The model fake-model does not exist."
    )
    assert trial.turn(0).messages == [] and result.answer == ""
