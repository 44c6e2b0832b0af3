"""What the gemini harness runs: its command lines for a turn, a resumed turn, plan mode and
approval; its capabilities and plan folder; the settings it gives the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from proctor import profile, variant
from runner.harnesses import (
    CONVERSATION_RESUME,
    PLAN_MODE,
    HarnessError,
    TurnRequest,
    create_harness,
)
from runner.harnesses.gemini.harness import GeminiHarness
from runner.sandboxes.local import LocalSandbox

SESSION = "11111111-2222-3333-4444-555555555555"


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def request(**kwargs) -> TurnRequest:
    return TurnRequest(
        **{"prompt": "-v is a prompt, not a flag", "index": 0, "model": "gemini-x", **kwargs}
    )


@pytest.fixture
def sandbox() -> Iterator[LocalSandbox]:
    box = LocalSandbox()
    yield box
    box.destroy()


def test_it_offers_resume_and_plan_mode_with_a_plan_folder(sandbox):
    v = variant("gemini", model="gemini-x")

    assert GeminiHarness.capabilities_for(v) == {CONVERSATION_RESUME, PLAN_MODE}
    assert GeminiHarness.declares_plan_file(v)
    assert create_harness(v).plan_file(sandbox) == sandbox.host_home / ".proctor" / "gemini-plans"


def test_it_starts_a_named_session_then_resumes_it_in_yolo_mode(sandbox):
    harness = create_harness(variant("gemini", model="gemini-x", args=["--debug"]))

    first = harness.command_line(sandbox, request(), new_session_id=SESSION)
    follow_up = harness.command_line(
        sandbox, request(index=1, session_id=SESSION), new_session_id=None
    )

    assert first[:3] == ["gemini", "--output-format", "stream-json"]
    assert first[-1] == "--prompt=-v is a prompt, not a flag"
    assert flag(first, "--session-id") == SESSION and "--resume" not in first
    assert flag(follow_up, "--resume") == SESSION and "--session-id" not in follow_up
    assert flag(first, "--approval-mode") == "yolo" and flag(first, "--model") == "gemini-x"
    assert "--debug" in first


def test_it_plans_under_a_policy_that_keeps_the_cli_from_approving_itself(sandbox):
    harness = create_harness(variant("gemini"))

    planning = harness.command_line(
        sandbox, request(mode="plan", model=None), new_session_id=SESSION
    )
    approval = harness.command_line(
        sandbox, request(index=1, mode="act", session_id=SESSION), new_session_id=None
    )

    assert flag(planning, "--approval-mode") == "plan" and "--model" not in planning
    assert flag(planning, "--policy") == f"{sandbox.home}/.proctor/gemini-plan-policy.toml"
    assert flag(approval, "--approval-mode") == "yolo" and "--policy" not in approval


def test_it_keeps_the_profiles_settings_and_adds_what_headless_runs_need(sandbox):
    # As set-up left them: the profile's own settings in the trial's ~/.gemini, a workspace
    # whose settings declare a hook.
    (sandbox.host_home / ".gemini").mkdir()
    (sandbox.host_home / ".gemini" / "settings.json").write_text(
        json.dumps({"ui": {"theme": "Dracula"}, "general": {"vimMode": True}})
    )
    sandbox.write_text(
        ".gemini/settings.json",
        json.dumps(
            {"hooks": {"AfterTool": [{"hooks": [{"type": "command", "command": "./notify.sh"}]}]}}
        ),
    )
    harness = create_harness(variant("gemini", profile=profile("g", env={"GEMINI_API_KEY": "k"})))
    notes: list[str] = []

    harness._write_settings(sandbox, lambda _stream, line: notes.append(line))

    settings = json.loads((sandbox.host_home / ".gemini" / "settings.json").read_text())
    assert settings["ui"] == {"theme": "Dracula"} and settings["general"]["vimMode"] is True
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["general"]["enableAutoUpdate"] is False
    assert settings["privacy"]["usageStatisticsEnabled"] is False
    assert settings["hooksConfig"]["disabled"] == ["./notify.sh"]
    assert notes == ["gemini: workspace hooks disabled (not under test): ./notify.sh"]


def test_it_refuses_profile_settings_it_cannot_read(sandbox):
    harness = create_harness(variant("gemini", profile=profile("g")))
    (sandbox.host_home / ".gemini").mkdir()
    (sandbox.host_home / ".gemini" / "settings.json").write_text('{"ui": {} // a comment\n}')

    with pytest.raises(
        HarnessError, match="profile g: settings.json in its dir must be a plain JSON object"
    ):
        harness._write_settings(sandbox, lambda _stream, _line: None)


def test_it_says_how_to_install_the_cli_when_it_is_missing(sandbox):
    harness = create_harness(variant("gemini", profile=profile("g", env={"PATH": "/nonexistent"})))

    with pytest.raises(
        HarnessError, match="`gemini` command does not run in the sandbox.*@google/gemini-cli"
    ):
        harness.setup(sandbox, lambda _stream, _line: None)
