"""What the codex harness runs: its command lines for a turn and a resumed turn, the provider
it builds from the profile's env, and its capabilities (no plan mode in `codex exec`)."""

from __future__ import annotations

import pytest

from proctor import profile, variant
from runner.harnesses import CONVERSATION_RESUME, HarnessError, TurnRequest, create_harness
from runner.harnesses.codex.harness import CodexHarness


def overrides(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv) if word == "-c"]


def request(**kwargs) -> TurnRequest:
    return TurnRequest(**{"prompt": "-h is a prompt", "index": 0, "model": "gpt-x", **kwargs})


def test_it_offers_resume_but_not_plan_mode():
    v = variant("codex", model="gpt-x")

    assert CodexHarness.capabilities_for(v) == {CONVERSATION_RESUME}
    assert not CodexHarness.declares_plan_file(v)


def test_it_starts_a_thread_then_resumes_it_with_every_flag_again():
    harness = create_harness(
        variant("codex", model="gpt-x", config={"model_reasoning_effort": "high"})
    )

    first = harness.command_line(request(system_prompt="Be brief."))
    follow_up = harness.command_line(request(index=1, session_id="01a22b77-e338"))

    assert first[:2] == ["codex", "exec"] and first[-2:] == ["--", "-h is a prompt"]
    assert follow_up[:4] == ["codex", "exec", "resume", "01a22b77-e338"]
    for argv in (first, follow_up):
        assert {
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
        } <= set(argv)
        assert argv[argv.index("--model") + 1] == "gpt-x"
        assert 'model_reasoning_effort="high"' in overrides(argv)
    # Developer instructions belong to the thread: given once, when it starts.
    assert 'developer_instructions="Be brief."' in overrides(first)
    assert not any(o.startswith("developer_instructions") for o in overrides(follow_up))


def test_it_points_codex_at_the_profiles_base_url_through_a_provider_of_its_own(monkeypatch):
    monkeypatch.setenv("PROCTOR_TEST_GATEWAY", "http://127.0.0.1:9/v1")
    harness = create_harness(
        variant(
            "codex",
            profile=profile(
                "gw", env={"OPENAI_BASE_URL": "${PROCTOR_TEST_GATEWAY}", "CODEX_API_KEY": "k"}
            ),
        )
    )

    assert overrides(harness.command_line(request())) == [
        'model_provider="proctor"',
        'model_providers.proctor={name="Proctor profile",base_url="http://127.0.0.1:9/v1",'
        'env_key="CODEX_API_KEY",wire_api="responses"}',
    ]
    assert overrides(create_harness(variant("codex")).command_line(request())) == []


def test_it_refuses_a_config_option_that_is_not_a_dict():
    with pytest.raises(HarnessError, match="option config must be a dict"):
        create_harness(variant("codex", name="v1", config="model=x"))
