"""What the claude-code harness runs: its command lines for a turn, a resumed turn, plan mode
and approval; its capabilities; and finding the CLI in the sandbox."""

from __future__ import annotations

import pytest

from harnesses.agent_cli_runs import CLI_BIN, require_cli
from proctor import profile, variant
from runner.harnesses import (
    CONVERSATION_RESUME,
    PLAN_MODE,
    HarnessError,
    TurnRequest,
    create_harness,
)
from runner.harnesses.claude_code.harness import ClaudeCodeHarness
from runner.sandboxes.local import LocalSandbox


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def request(**kwargs) -> TurnRequest:
    return TurnRequest(
        **{"prompt": "-v is a prompt, not a flag", "index": 0, "model": "claude-x", **kwargs}
    )


def test_it_offers_resume_and_plan_mode_with_a_plan_file():
    v = variant("claude-code", model="claude-x")

    assert ClaudeCodeHarness.capabilities_for(v) == {CONVERSATION_RESUME, PLAN_MODE}
    assert ClaudeCodeHarness.declares_plan_file(v)
    sandbox = LocalSandbox()
    try:
        assert create_harness(v).plan_file(sandbox) == sandbox.host_home / ".claude" / "plans"
    finally:
        sandbox.destroy()


def test_it_starts_a_named_session_then_resumes_it():
    harness = create_harness(variant("claude-code", model="claude-x"))

    first = harness.command_line(
        request(system_prompt="Be brief."), new_session_id="11111111-2222-3333-4444-555555555555"
    )
    follow_up = harness.command_line(
        request(index=1, session_id="11111111-2222-3333-4444-555555555555"), new_session_id=None
    )

    assert first[:5] == ["claude", "-p", "--output-format", "stream-json", "--verbose"]
    assert first[-2:] == ["--", "-v is a prompt, not a flag"]
    assert (
        flag(first, "--session-id") == "11111111-2222-3333-4444-555555555555"
        and "--resume" not in first
    )
    assert (
        flag(follow_up, "--resume") == "11111111-2222-3333-4444-555555555555"
        and "--session-id" not in follow_up
    )
    assert flag(first, "--model") == "claude-x"
    # The suite's system prompt comes with the first turn only, yet every invocation needs it.
    assert (
        flag(first, "--append-system-prompt")
        == flag(follow_up, "--append-system-prompt")
        == "Be brief."
    )
    assert flag(first, "--setting-sources") == "user"


def test_it_plans_in_plan_mode_and_acts_in_the_variants_mode():
    default = create_harness(variant("claude-code"))
    careful = create_harness(
        variant(
            "claude-code",
            permission_mode="acceptEdits",
            project_settings=True,
            args=["--max-turns", "5"],
        )
    )

    assert (
        flag(default.command_line(request(mode="plan"), new_session_id=None), "--permission-mode")
        == "plan"
    )
    assert (
        flag(default.command_line(request(mode="act"), new_session_id=None), "--permission-mode")
        == "bypassPermissions"
    )
    acting = careful.command_line(request(), new_session_id=None)
    assert flag(acting, "--permission-mode") == "acceptEdits"
    assert flag(acting, "--setting-sources") == "user,project,local"
    assert flag(acting, "--max-turns") == "5"


def test_it_refuses_an_unknown_permission_mode_in_one_sentence():
    with pytest.raises(HarnessError, match=r"option permission_mode must be one of .*, not 'yolo'"):
        create_harness(variant("claude-code", name="v1", permission_mode="yolo"))


def test_it_says_how_to_install_the_cli_when_the_sandbox_has_none():
    harness = create_harness(
        variant("claude-code", profile=profile("bare", env={"PATH": "/usr/bin:/bin"}))
    )
    sandbox = LocalSandbox()
    try:
        with pytest.raises(HarnessError) as caught:
            harness.setup(sandbox, lambda stream, line: None)
    finally:
        sandbox.destroy()

    assert "the `claude` command does not run in the sandbox" in str(caught.value)
    assert "npm install -g --prefix ~/.local @anthropic-ai/claude-code" in str(caught.value)


def test_it_runs_the_profiles_install_step_and_finds_the_cli_in_the_trials_home(tmp_path):
    require_cli("claude")
    config = tmp_path / "claude-config"
    config.mkdir()
    (config / "CLAUDE.md").write_text("Prefer small diffs.\n")
    install = f"mkdir -p ~/.local/bin && ln -s {CLI_BIN}/claude ~/.local/bin/claude"
    harness = create_harness(
        variant(
            "claude-code",
            profile=profile(
                "installed", install=install, dir=str(config), env={"PATH": "/usr/bin:/bin"}
            ),
        )
    )
    sandbox = LocalSandbox()
    try:
        harness.setup(sandbox, lambda stream, line: None)
        shipped = (sandbox.host_home / ".claude" / "CLAUDE.md").read_text()
    finally:
        sandbox.destroy()

    assert "Claude Code" in harness.version
    assert shipped == "Prefer small diffs.\n"
