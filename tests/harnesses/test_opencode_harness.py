"""What the opencode harness runs: its command lines for a turn, a resumed turn, plan mode and
approval; its capabilities and plan folder; the environment it isolates the CLI with."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from proctor import variant
from runner.harnesses import CONVERSATION_RESUME, PLAN_MODE, TurnRequest, create_harness
from runner.harnesses.opencode.harness import OpenCodeHarness
from runner.sandboxes.local import LocalSandbox


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def request(**kwargs) -> TurnRequest:
    return TurnRequest(
        **{"prompt": "-v is a prompt, not a flag", "index": 0, "model": "fake/m", **kwargs}
    )


@pytest.fixture
def sandbox() -> Iterator[LocalSandbox]:
    box = LocalSandbox()
    yield box
    box.destroy()


def test_it_offers_resume_and_plan_mode_with_a_plan_folder_where_opencode_writes_it(sandbox):
    v = variant("opencode", model="fake/m")
    harness = create_harness(v)

    assert OpenCodeHarness.capabilities_for(v) == {CONVERSATION_RESUME, PLAN_MODE}
    assert OpenCodeHarness.declares_plan_file(v)
    assert (
        harness.plan_file(sandbox) == sandbox.host_home / ".local" / "share" / "opencode" / "plans"
    )
    subprocess.run(["git", "init", "--quiet", sandbox.workspace], check=True)
    assert harness.plan_file(sandbox) == sandbox.host_workspace / ".opencode" / "plans"


def test_it_runs_a_turn_then_continues_its_session():
    harness = create_harness(variant("opencode", model="fake/m", args=["--thinking"]))

    first = harness.command_line(request())
    follow_up = harness.command_line(request(index=1, session_id="ses_abc"))

    assert first[:5] == ["opencode", "run", "--format", "json", "--auto"]
    assert first[-2:] == ["--", "-v is a prompt, not a flag"]
    assert (
        flag(first, "--model") == "fake/m" and "--session" not in first and "--agent" not in first
    )
    assert flag(follow_up, "--session") == "ses_abc"
    assert "--thinking" in first


def test_it_plans_with_the_plan_agent_and_implements_with_the_build_agent(sandbox):
    harness = create_harness(variant("opencode", model="fake/m"))

    assert flag(harness.command_line(request(mode="plan")), "--agent") == "plan"
    assert (
        flag(harness.command_line(request(index=1, mode="act", session_id="ses_abc")), "--agent")
        == "build"
    )
    assert "OPENCODE_EXPERIMENTAL_PLAN_MODE" not in harness.agent_env(sandbox)
    harness._plan_flow = True
    assert harness.agent_env(sandbox)["OPENCODE_EXPERIMENTAL_PLAN_MODE"] == "1"


def test_it_leaves_the_workspaces_own_configuration_out_unless_the_variant_opts_in(sandbox):
    default = create_harness(variant("opencode")).agent_env(sandbox)
    opted_in = create_harness(variant("opencode", project_settings=True)).agent_env(sandbox)

    assert default["OPENCODE_DISABLE_PROJECT_CONFIG"] == "1"
    assert "OPENCODE_DISABLE_PROJECT_CONFIG" not in opted_in
    assert default["OPENCODE_DISABLE_AUTOUPDATE"] == "1"
