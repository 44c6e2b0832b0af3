"""Profile env values that name the worker's own variables: filled in when the agent starts,
refused in one sentence when missing, and listed for redaction."""

from __future__ import annotations

import pytest

from runner.harnesses.profile_env import MissingWorkerVariable, resolve_profile_env, worker_secrets

WORKER = {
    "ANTHROPIC_API_KEY": "sk-ant-worker-secret",
    "GATEWAY_TOKEN": "tok-123456",
    "PATH": "/usr/bin:/bin",
    "HOME": "/root",
}


def test_it_fills_in_bare_and_braced_references_and_keeps_literals():
    env = resolve_profile_env(
        {
            "ANTHROPIC_API_KEY": "$ANTHROPIC_API_KEY",
            "AUTH": "Bearer ${GATEWAY_TOKEN}",
            "PATH": "/opt/agents/bin:$PATH",
            "PRICE": "$$5 and $5",
            "BASE_URL": "http://127.0.0.1:8080",
        },
        profile="claude",
        worker_env=WORKER,
    )

    assert env == {
        "ANTHROPIC_API_KEY": "sk-ant-worker-secret",
        "AUTH": "Bearer tok-123456",
        "PATH": "/opt/agents/bin:/usr/bin:/bin",
        "PRICE": "$5 and $5",
        "BASE_URL": "http://127.0.0.1:8080",
    }


def test_it_names_the_missing_variable_in_one_sentence():
    with pytest.raises(MissingWorkerVariable) as caught:
        resolve_profile_env(
            {"OPENAI_API_KEY": "${OPENAI_KEY_FOR_EVALS}"}, profile="codex", worker_env=WORKER
        )

    assert str(caught.value) == (
        "profile codex: env OPENAI_API_KEY refers to $OPENAI_KEY_FOR_EVALS, which is not set in the worker's environment"
    )


def test_it_lists_the_referenced_values_to_redact_but_not_plain_paths():
    secrets = worker_secrets(
        {
            "KEY": "$ANTHROPIC_API_KEY",
            "AUTH": "Bearer ${GATEWAY_TOKEN}",
            "PATH": "x:$PATH",
            "H": "$HOME",
            "GONE": "$NOT_SET",
            "LITERAL": "test-key",
        },
        worker_env=WORKER,
    )

    assert sorted(secrets) == ["sk-ant-worker-secret", "tok-123456"]
