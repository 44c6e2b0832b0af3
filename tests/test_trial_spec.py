"""The trial spec: what a worker is handed is one JSON value that survives the round trip."""

from __future__ import annotations

import json

from runner.trial.spec import RunCode, TrialSpec

RUN_SPEC = {
    "variant": {"name": "careful", "harness": "command", "profile": {"digest": "ab" * 32}},
    "limits": {"max_turns": 8, "timeout_ms": 60_000},
    "case_version": 3,
    "definition_hash": "cd" * 32,
    "code": {
        "suite": "calc",
        "case": "fix-add",
        "bundle": "ef" * 32,
        "eval_module": "evals/calc.eval.py",
        "variant": "careful",
        "variant_hash": "01" * 32,
        "profile_bundle": "ab" * 32,
        "source": {"kind": "bundled-repo", "bundle": "23" * 32, "commit": "4" * 40, "ref": "main"},
    },
}


def test_it_builds_a_trial_spec_from_the_run_and_the_batch_options():
    spec = TrialSpec.for_trial(
        trial_id=7,
        index=2,
        organization_id=1,
        run_spec=RUN_SPEC,
        batch_options={"responder_model": "gpt-x", "judge_model": None},
    )

    assert spec.code == RunCode(**RUN_SPEC["code"])
    assert (spec.trial_id, spec.index, spec.case_version) == (7, 2, 3)
    assert spec.limits["timeout_ms"] == 60_000
    assert spec.responder_model == "gpt-x" and spec.judge_model is None


def test_it_survives_a_json_round_trip_unchanged():
    spec = TrialSpec.for_trial(
        trial_id=7, index=0, organization_id=1, run_spec=RUN_SPEC, batch_options={}
    )
    text = json.dumps(spec.to_json())
    assert TrialSpec.from_json(json.loads(text)) == spec


def test_a_run_recorded_before_bundles_has_no_code():
    old = {k: v for k, v in RUN_SPEC.items() if k != "code"}
    spec = TrialSpec.for_trial(
        trial_id=1, index=0, organization_id=1, run_spec=old, batch_options={}
    )
    assert spec.code is None
    assert TrialSpec.from_json(spec.to_json()) == spec
