"""The comparability guard: compare names what differs between the sides besides the agents'
results, one warning per kind of difference, and says nothing when the sides match."""

from __future__ import annotations

import pytest

from compare.seeding import P, Seed
from evals_app.comparison import compare_batches
from evals_app.models import Consultation, Event, Trial
from proctor.agent_events import CLI_VERSION_NOTE

pytestmark = pytest.mark.django_db

CELLS = {("fix-add", "careful"): [P, P, P]}


@pytest.fixture
def seed() -> Seed:
    return Seed()


def _kinds(a, b) -> dict[str, str]:
    return {w.kind: w.message for w in compare_batches(a, b).warnings}


def test_identical_sides_raise_no_warning(seed):
    assert _kinds(seed.batch(CELLS), seed.batch(CELLS)) == {}


def test_a_new_case_version_is_named(seed):
    a = seed.batch(CELLS)
    b = seed.batch(CELLS, versions={"fix-add": 2})
    assert _kinds(a, b) == {
        "case_version": "case version differs: calc/fix-add is v1 in A, v2 in B"
    }


def test_a_changed_agent_digest_is_named(seed):
    a = seed.batch(CELLS, variants={"careful": {"digest": "a" * 64}})
    b = seed.batch(CELLS, variants={"careful": {"digest": "b" * 64}})
    assert _kinds(a, b) == {
        "agent_digest": f"agent digest (profile) differs: careful ran {'a' * 12} in A, "
        f"{'b' * 12} in B"
    }


def test_a_changed_harness_is_named(seed):
    a = seed.batch(CELLS)
    b = seed.batch(CELLS, variants={"careful": {"harness": "claude-code"}})
    assert _kinds(a, b) == {
        "harness": "harness differs: careful ran command in A, claude-code in B"
    }


def test_a_changed_cli_version_is_named(seed):
    a, b = seed.batch(CELLS), seed.batch(CELLS)
    for batch, version in ((a, "claude 2.0.1"), (b, "claude 2.0.9")):
        for trial in Trial.objects.filter(run__batch=batch):
            Event.objects.create(
                trial=trial,
                seq=0,
                kind="Log",
                at=trial.finished_at,
                data={"stream": "proctor", "text": f"{CLI_VERSION_NOTE}{version}"},
            )
    assert _kinds(a, b) == {
        "cli_version": "agent CLI version differs: careful ran claude 2.0.1 in A, claude 2.0.9 in B"
    }


def test_a_changed_proctor_version_is_named(seed):
    a = seed.batch(CELLS, options={"proctor_version": "0.1.0"})
    b = seed.batch(CELLS, options={"proctor_version": "0.2.0"})
    assert _kinds(a, b) == {
        "proctor_version": "harness (Proctor) version differs: A ran Proctor 0.1.0, B ran 0.2.0"
    }


@pytest.mark.parametrize(
    ("kind", "option", "what"),
    [("judge", "judge_model", "judge model"), ("responder", "responder_model", "responder model")],
)
def test_a_changed_judge_or_responder_model_is_named(seed, kind, option, what):
    a, b = seed.batch(CELLS), seed.batch(CELLS)
    for batch, model in ((a, "gpt-4.1"), (b, "gpt-5")):
        trial = Trial.objects.filter(run__batch=batch).first()
        Consultation.objects.create(trial=trial, kind=kind, model=model)
    assert _kinds(a, b) == {option: f"{what} differs: A used gpt-4.1, B used gpt-5"}


def test_a_judge_model_given_on_the_command_line_counts_too(seed):
    a = seed.batch(CELLS, options={"judge_model": "gpt-4.1"})
    b = seed.batch(CELLS, options={"judge_model": "gpt-5"})
    assert set(_kinds(a, b)) == {"judge_model"}


def test_a_changed_sandbox_is_named(seed):
    a = seed.batch(CELLS)
    b = seed.batch(CELLS, variants={"careful": {"sandbox": "docker"}})
    assert _kinds(a, b) == {"sandbox": "sandbox differs: careful ran local in A, docker in B"}


def test_a_changed_agent_model_is_named(seed):
    a = seed.batch(CELLS, variants={"careful": {"model": "claude-sonnet-4"}})
    b = seed.batch(CELLS, variants={"careful": {"model": "claude-opus-4"}})
    assert _kinds(a, b) == {
        "model": "agent model differs: careful ran claude-sonnet-4 in A, claude-opus-4 in B"
    }


def test_a_changed_trial_count_is_named(seed):
    a = seed.batch(CELLS)
    b = seed.batch({("fix-add", "careful"): [P]})
    assert _kinds(a, b) == {
        "trial_count": "trial count differs: calc/fix-add × careful ran 3 in A, 1 in B"
    }


def test_a_long_list_is_cut_with_a_count(seed):
    cases = [f"case-{i}" for i in range(5)]
    a = seed.batch({(c, "careful"): [P] for c in cases})
    b = seed.batch({(c, "careful"): [P] for c in cases}, versions=dict.fromkeys(cases, 2))
    assert _kinds(a, b)["case_version"].endswith("; and 2 more")
