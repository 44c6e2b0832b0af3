"""`proctor cases from-transcripts` as the reference describes its generated tests: the weighted
assertion table, ``threshold=0.6``, the turn target (twice the caller's turns, at most 15) as a
soft rubric under a generous hard ceiling (``--max-turns``), ``--seed-turns`` for
mid-conversation cases, ``disposition`` accepted for ``outcome``, and an agent model that must
be named. The generated file then runs with `proctor eval` against the fake model server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import proctor_env, run_proctor
from conversations.recorded import recorded_trial, run_eval
from e2e.running import Backend
from fakes.openai_server import FakeModelServer

from evals_app.loading import load_file
from simulated.conftest import MODEL, model_env
from simulated.model_roles import graded
from simulated.running import check_rows, score_and_threshold

AGENT_MODEL = "fake-agent"
PERSONA = "You are Dana Ruiz, who wants a demo on Thursday. You answer briefly."
AGENT_REPLY = "Thanks, Dana: your demo is booked for Thursday at 3pm."
RECORDING = {
    "disposition": "Demo booked for Thursday",
    "messages": [
        {"role": "assistant", "content": "Acme sales, how can I help?"},
        {"role": "user", "content": "Hi, I'm Dana and I'd like a demo."},
        {"role": "assistant", "content": "Happy to. Which day suits you?"},
        {"role": "user", "content": "Thursday, please."},
        {"role": "assistant", "content": "Thursday at 3pm is free. Shall I book it?"},
        {"role": "user", "content": "Yes, book it."},
        {"role": "assistant", "content": "Booked. Goodbye!"},
    ],
}
# (type, weight, metric) of every generated case, in order: the reference's table.
TABLE = [
    ("not-icontains", 3.0, "no-json-leak"),
    ("llm-rubric", 2.0, "tone"),
    ("llm-rubric", 1.5, "role-adherence"),
    ("llm-rubric", 1.5, "knowledge-retention"),
    ("llm-rubric", 0.5, "closing-attempt"),
    ("latency", 0.0, "latency"),
    ("llm-rubric", 2.0, "disposition-outcome"),
    ("llm-rubric", 0.5, "turn-efficiency"),
]


def every_model(body: dict[str, Any]) -> str:
    """The fake server's part: the persona writer, the agent, the caller and the judges."""
    system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
    if body.get("model") == AGENT_MODEL:
        return AGENT_REPLY
    if '{"instructions"' in system:
        return json.dumps({"instructions": PERSONA})
    if '"passed"' in system:
        # The tone rubric fails: the weighted score still clears 0.6.
        prompt = json.dumps(body["messages"])
        return graded("warm and professional" not in prompt, reason="graded")
    return "###STOP###"


@pytest.fixture
def project(tmp_path: Path, fake_model_server: FakeModelServer) -> tuple[Path, dict[str, str]]:
    (tmp_path / "calls").mkdir()
    (tmp_path / "calls" / "demo.json").write_text(json.dumps(RECORDING))
    fake_model_server.script(*[every_model] * 200)
    return tmp_path, proctor_env(tmp_path / "proctor-home", **model_env(fake_model_server))


def from_transcripts(project, *args: str):
    folder, env = project
    return run_proctor("cases", "from-transcripts", "calls", *args, cwd=folder, env=env)


def test_the_generated_case_carries_the_weighted_table_the_threshold_and_a_soft_turn_target(
    project,
) -> None:
    result = from_transcripts(project, "--agent-model", AGENT_MODEL, "--suite", "calls")

    assert result.returncode == 0, result.stderr
    [case] = load_file(project[0] / "calls.eval.py").suites[0].cases
    assert [(c.type, float(c.weight), c.metric) for c in case.checks] == TABLE
    assert case.threshold == 0.6
    rubric = {c.metric: c.value for c in case.checks}
    # Three caller turns: a target of six, as a rubric; the ceiling is the generous default.
    assert "ideally within 6 turns" in rubric["turn-efficiency"]
    assert case.user.max_turns == 20
    # The recording's disposition is the ending the rubric asks for.
    assert rubric["disposition-outcome"].endswith("Demo booked for Thursday")
    assert load_file(project[0] / "calls.eval.py").suites[0].variants[0].model == AGENT_MODEL


def test_max_turns_sets_the_ceiling_and_seed_turns_starts_mid_conversation(project) -> None:
    result = from_transcripts(
        project, "--agent-model", AGENT_MODEL, "--max-turns", "6", "--seed-turns", "1"
    )

    assert result.returncode == 0, result.stderr
    [case] = load_file(project[0] / "calls.eval.py").suites[0].cases
    assert case.user.max_turns == 6
    # The greeting and the first exchange are seeded; the next caller message opens the case.
    assert case.user.initial_messages == (
        ("assistant", "Acme sales, how can I help?"),
        ("user", "Hi, I'm Dana and I'd like a demo."),
        ("assistant", "Happy to. Which day suits you?"),
    )
    assert case.user.first_message == "Thursday, please."
    # Two caller turns are left after the seed: a target of four.
    assert "ideally within 4 turns" in {c.metric: c.value for c in case.checks}["turn-efficiency"]


def test_the_turn_target_is_at_most_fifteen(project) -> None:
    folder, _ = project
    long_call = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"Line {n}."} for n in range(24)
    ]
    (folder / "calls" / "demo.json").write_text(json.dumps(long_call))

    assert from_transcripts(project, "--agent-model", AGENT_MODEL).returncode == 0
    [case] = load_file(folder / "calls.eval.py").suites[0].cases
    assert "ideally within 15 turns" in {c.metric: c.value for c in case.checks}["turn-efficiency"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "Name the model of the agent under test with --agent-model MODEL"),
        (("--agent-model", AGENT_MODEL, "--max-turns", "0"), "--max-turns must be 1 to 50"),
        (("--agent-model", AGENT_MODEL, "--seed-turns", "-1"), "--seed-turns must be 0 or more"),
    ],
)
def test_a_bad_flag_is_refused_in_one_line_and_writes_nothing(project, args, message) -> None:
    result = from_transcripts(project, *args)

    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert list(project[0].glob("*.eval.py")) == []


def test_a_recording_too_short_for_seed_turns_is_skipped_with_its_reason(project) -> None:
    result = from_transcripts(project, "--agent-model", AGENT_MODEL, "--seed-turns", "3")

    assert result.returncode == 1
    assert "Skipped demo.json: has 3 caller messages; --seed-turns 3 needs at least 4." in (
        result.stderr
    )


def test_the_generated_file_runs_with_proctor_eval(project) -> None:
    folder, env = project
    assert (
        from_transcripts(project, "--agent-model", AGENT_MODEL, "--suite", "calls").returncode == 0
    )
    backend = Backend("sqlite", env)

    run = run_eval(backend, folder, "calls.eval.py")
    trial = recorded_trial(backend, run.batch, "demo")

    assert trial.user_messages == ["Hi, I'm Dana and I'd like a demo."]
    assert trial.turns[0]["answer"] == AGENT_REPLY
    rows = check_rows(trial)
    assert [(r["metric"], r["weight"], r["passed"]) for r in rows] == [
        (metric, weight, metric != "tone") for _type, weight, metric in TABLE
    ]
    # Everything but tone (weight 2 of 11 that count) passed: 9/11, over the 0.6 threshold.
    score, threshold = score_and_threshold(trial)
    assert (round(score, 4), threshold) == (round(9 / 11, 4), 0.6)
    assert trial.row["status"] == "passed"
    assert MODEL != AGENT_MODEL
