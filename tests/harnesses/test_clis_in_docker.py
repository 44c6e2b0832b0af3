"""The five real agent CLIs in the docker sandbox, from the proctor-agents image
(tests/setup/agent-image.sh), against the fake model servers on the host's loopback: each
starts, runs its scripted shell command or edit in the container, and the turn's file changes
name what it wrote. Before the image, Codex and Gemini failed with
"/usr/bin/env: 'node': No such file" and Aider's virtualenv was missing."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from conftest import tier_unavailable
from fakes.anthropic_api import FakeAnthropicServer, anthropic_server_fixture, tool_use  # noqa: F401
from fakes.chat_stream import FakeChatServer, chat_server_fixture, tool_call  # noqa: F401
from fakes.gemini_api import MODEL as GEMINI_MODEL
from fakes.gemini_api import FakeGeminiServer, gemini_server_fixture  # noqa: F401
from fakes.gemini_api import shell as gemini_shell
from fakes.openai_responses import FakeResponsesServer, responses_server_fixture  # noqa: F401
from fakes.openai_responses import shell as codex_shell

from harnesses.agent_cli_runs import CliTrial, commands
from proctor import profile, variant
from proctor.definitions import Variant
from runner.sandboxes import create_sandbox
from runner.sandboxes.docker import AGENT_IMAGE, docker_problem

pytestmark = pytest.mark.docker

WRITE_HELLO = "echo hi > hello.txt && cat hello.txt"


def in_docker(harness: str, model: str, env: dict[str, str]) -> Variant:
    """A variant of ``harness`` on the docker sandbox with the agents' image; the host's
    network, so the CLI reaches the fake server on loopback."""
    if problem := docker_problem(AGENT_IMAGE):
        tier_unavailable("docker", problem)
    return variant(
        harness,
        model=model,
        profile=profile(harness, env=env),
        sandbox="docker",
        network=True,
        image=AGENT_IMAGE,
    )


@pytest.fixture
def docker_trial() -> Iterator[Callable[[Variant], CliTrial]]:
    trials: list[CliTrial] = []

    def make(v: Variant) -> CliTrial:
        trial = CliTrial(v, sandbox=create_sandbox(v), system_prompt="Answer in English.")
        trials.append(trial)
        return trial

    yield make
    for trial in trials:
        trial.destroy()


def assert_wrote_hello(trial: CliTrial, *, ran_shell: bool = True) -> None:
    turn = trial.turn(0)
    assert (trial.workspace / "hello.txt").read_text() == "hi\n"
    assert f"{trial.sandbox.workspace}/hello.txt" in turn.file_changes
    assert turn.answer == "Done: hello.txt holds hi."
    if ran_shell:
        assert commands(turn)[0][0] == WRITE_HELLO
    assert trial.harness.version, "the CLI's --version ran in the container"


def test_claude_code_runs_in_docker(anthropic_server: FakeAnthropicServer, docker_trial):
    trial = docker_trial(
        in_docker(
            "claude-code",
            "claude-fake-1",
            {"ANTHROPIC_BASE_URL": anthropic_server.root_url, "ANTHROPIC_API_KEY": "test-key"},
        )
    )
    anthropic_server.script(
        tool_use("Bash", {"command": WRITE_HELLO, "description": "create hello.txt"}),
        "Done: hello.txt holds hi.",
    )

    result = trial.send("Create hello.txt containing hi.")

    assert result.exit_code == 0, trial.recorder.raw[-5:]
    assert_wrote_hello(trial)


def test_codex_runs_in_docker(responses_server: FakeResponsesServer, docker_trial):
    trial = docker_trial(
        in_docker(
            "codex",
            "gpt-fake-codex",
            {"OPENAI_BASE_URL": responses_server.url, "OPENAI_API_KEY": "test-key"},
        )
    )
    responses_server.script(codex_shell(WRITE_HELLO), "Done: hello.txt holds hi.")

    result = trial.send("Create hello.txt containing hi.")

    assert result.exit_code == 0, trial.recorder.raw[-5:]
    assert_wrote_hello(trial)


def test_gemini_runs_in_docker(gemini_server: FakeGeminiServer, docker_trial):
    trial = docker_trial(
        in_docker(
            "gemini",
            GEMINI_MODEL,
            {"GOOGLE_GEMINI_BASE_URL": gemini_server.base_url, "GEMINI_API_KEY": "test-key"},
        )
    )
    gemini_server.script(gemini_shell(WRITE_HELLO), "Done: hello.txt holds hi.")

    result = trial.send("Create hello.txt containing hi.")

    assert result.exit_code == 0, trial.recorder.raw[-5:]
    assert_wrote_hello(trial)


def test_opencode_runs_in_docker(chat_server: FakeChatServer, docker_trial):
    config = {
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": chat_server.url, "apiKey": "test-key"},
                "models": {"fake-model": {"name": "Fake model"}},
            }
        }
    }
    trial = docker_trial(
        in_docker("opencode", "fake/fake-model", {"OPENCODE_CONFIG_CONTENT": json.dumps(config)})
    )
    chat_server.script(
        tool_call("bash", {"command": WRITE_HELLO, "description": "run it"}),
        "Done: hello.txt holds hi.",
    )

    result = trial.send("Create hello.txt containing hi.")

    assert result.exit_code == 0, trial.recorder.raw[-5:]
    assert_wrote_hello(trial)


def test_aider_runs_in_docker(docker_trial):
    reply = "Done: hello.txt holds hi.\n\nhello.txt\n```\n<<<<<<< SEARCH\n=======\nhi\n>>>>>>> REPLACE\n```\n"
    # Aider offers the model no tools: every call is the agent's own.
    with FakeChatServer(side_calls_without_tools=False) as server:
        trial = docker_trial(
            in_docker(
                "aider",
                "openai/fake-model",
                {
                    "OPENAI_API_BASE": server.url,
                    "OPENAI_API_KEY": "test-key",
                    "AIDER_EDIT_FORMAT": "diff",
                },
            )
        )
        server.script(reply)

        result = trial.send("Create hello.txt containing hi.")

    assert result.exit_code == 0, trial.recorder.raw[-5:]
    turn = trial.turn(0)
    assert (trial.workspace / "hello.txt").read_text() == "hi\n"
    assert turn.file_changes == [f"{trial.sandbox.workspace}/hello.txt"]
    assert turn.answer.startswith("Done: hello.txt holds hi.")
    assert trial.harness.version.startswith("aider")
