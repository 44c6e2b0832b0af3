"""What the aider harness runs: its command line for a first turn and a follow-up, with and
without a repository; its capabilities."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from proctor import variant
from runner.harnesses import CONVERSATION_RESUME, TurnRequest, create_harness
from runner.harnesses.aider.harness import AiderHarness
from runner.sandboxes.local import LocalSandbox


def request(**kwargs) -> TurnRequest:
    return TurnRequest(
        **{"prompt": "-v is a prompt, not a flag", "index": 0, "model": "openai/m", **kwargs}
    )


@pytest.fixture
def sandbox() -> Iterator[LocalSandbox]:
    box = LocalSandbox()
    yield box
    box.destroy()


def test_it_offers_resume_through_its_chat_history_and_no_plan_mode(sandbox):
    v = variant("aider", model="openai/m")

    assert AiderHarness.capabilities_for(v) == {CONVERSATION_RESUME}
    assert not AiderHarness.declares_plan_file(v)
    assert create_harness(v).plan_file(sandbox) is None


def test_it_keeps_aider_from_changing_the_workspace_behind_the_agents_back(sandbox):
    harness = create_harness(variant("aider", model="openai/m", args=["--edit-format", "whole"]))

    argv = harness.command_line(sandbox, request(), system_prompt=False)

    assert argv[0] == "aider" and argv[-1] == "--message=-v is a prompt, not a flag"
    for needed in (
        "--yes-always",
        "--no-auto-commits",
        "--no-dirty-commits",
        "--no-gitignore",
        "--no-git",
    ):
        assert needed in argv
    assert argv[argv.index("--model") + 1] == "openai/m"
    assert (
        argv[argv.index("--analytics-log") + 1] == f"{sandbox.home}/.proctor/aider/analytics.jsonl"
    )
    assert "--restore-chat-history" not in argv and "--read" not in argv
    assert argv[argv.index("--edit-format") + 1] == "whole"


def test_it_uses_the_workspaces_repository_and_continues_an_earlier_chat(sandbox):
    harness = create_harness(variant("aider"))
    subprocess.run(["git", "init", "--quiet", sandbox.workspace], check=True)
    history = sandbox.host_home / ".proctor" / "aider" / "chat.history.md"
    history.parent.mkdir(parents=True)
    history.write_text(
        "\n# aider chat started at 2026-01-01 10:00:00\n\n#### First question  \n\nAn answer.\n"
    )

    argv = harness.command_line(sandbox, request(index=1, model=None), system_prompt=True)

    assert "--no-git" not in argv and "--model" not in argv
    assert "--restore-chat-history" in argv
    assert argv[argv.index("--read") + 1] == f"{sandbox.home}/.proctor/aider/system-prompt.md"
