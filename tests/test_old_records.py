"""Runs recorded by an earlier Proctor run from their record where it holds what they need, and
otherwise end in one line saying to record them again: never a traceback, never a guess."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_bundle_isolation import proctor_folders, record_project  # noqa: F401 (a fixture)

from evals_app.models import Organization, Run, Trial
from runner.jobs.execution import run_trial_by_id

pytestmark = pytest.mark.usefixtures("transactional_db", "proctor_folders")


def rewrite_spec(trial_id: int, change) -> None:
    run = Trial.objects.get(pk=trial_id).run
    spec = run.spec
    change(spec)
    Run.objects.filter(pk=run.pk).update(spec=spec)


def test_a_run_of_the_first_format_runs_from_its_record(
    tmp_path: Path,
):
    trial = record_project(tmp_path / "alpha", "alpha", Organization.objects.create(slug="a"))

    def first_format(spec):
        spec["code"].pop("record")

    rewrite_spec(trial, first_format)
    assert run_trial_by_id(trial) == "passed"


def test_a_run_whose_record_hid_a_value_it_needs_says_to_record_it_again(
    tmp_path: Path,
):
    trial = record_project(tmp_path / "alpha", "alpha", Organization.objects.create(slug="a"))

    def hidden_env(spec):
        spec["code"]["record"] = 1
        spec["variant"]["profile"]["env"] = {"API_KEY": "sha256:0123456789ab"}

    rewrite_spec(trial, hidden_env)
    assert run_trial_by_id(trial) == "errored"
    assert Trial.objects.get(pk=trial).error == (
        "variant command:echo was recorded before Proctor kept a variant's values whole (its "
        "env or key was hidden), so it cannot run from its record; run `proctor eval` to "
        "record it again"
    )


def test_a_record_missing_a_field_says_which(tmp_path: Path):
    trial = record_project(tmp_path / "alpha", "alpha", Organization.objects.create(slug="a"))

    def no_harness(spec):
        del spec["variant"]["harness"]

    rewrite_spec(trial, no_harness)
    assert run_trial_by_id(trial) == "errored"
    assert Trial.objects.get(pk=trial).error == (
        "case own-helpers (v1) under variant command:echo: its recorded variant cannot be read "
        "(no 'harness'); run `proctor eval` to record it again"
    )
