"""Two projects, one worker process: each trial imports its own project's helper modules from its
own bundle, even when both projects name a helper ``variants.py`` and their trials run side by
side in the same process."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from django.db import connections
from e2e.running import AGENTS, write_eval

from evals_app.models import Check, Organization, Trial
from runner.batches.planning import Selection, load_suites, plan_batch, record_locally
from runner.batches.submission import build_submission
from runner.jobs import eval_code
from runner.jobs.execution import run_trial_by_id

# The same eval in both projects but for the value it wants; the value it sees comes from the
# project's own variants.py, imported at module level and read when the validator runs.
ISOLATION_EVAL = f"""
import variants

from proctor import case, profile, suite, variant

WANT = {{want!r}}


def saw_its_own_variants(ctx):
    return {{{{"passed": variants.VALUE == WANT, "message": f"{{{{variants.VALUE}}}} from {{{{variants.__file__}}}}"}}}}


isolation = suite(
    "isolation",
    prompt="Fix the total",
    cases=[case("own-helpers", validate=saw_its_own_variants)],
    variants=[variant("command", profile=profile("echo", dir={str(AGENTS)!r}, run='bash "$PROCTOR_PROFILE_DIR/echo_agent.sh"'))],
)
"""


@pytest.fixture
def proctor_folders(settings, tmp_path: Path) -> None:
    """This test's own home, cache (where bundles are unpacked) and artifacts."""
    settings.PROCTOR_HOME = tmp_path / "proctor-home"
    settings.CACHE_DIR = tmp_path / "proctor-home" / "cache"
    settings.ARTIFACTS_DIR = tmp_path / "proctor-home" / "artifacts"


def record_project(root: Path, value: str, organization: Organization, trials: int = 1) -> int:
    """Write a project whose variants.py holds ``value``, record its batch as `proctor eval`
    does, and return its first queued trial (of ``trials``, all of one run)."""
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text(f'[project]\nname = "{value}"\n')
    write_eval(root / "evals", "variants.py", f"VALUE = {value!r}\n")
    eval_file = write_eval(root / "evals", "isolation.eval.py", ISOLATION_EVAL.format(want=value))
    planned = plan_batch(load_suites([str(eval_file)]), Selection(trials=trials))
    submission = build_submission(planned, {"paths": [str(eval_file)]}, max_bytes=10 * 1024 * 1024)
    _, trial_ids, _ = record_locally(organization, submission)
    assert len(trial_ids) == trials
    # Its trials run as on a worker that did not load the eval: from the bundle.
    eval_code.forget()
    return trial_ids[0]


def run_side_by_side(trial_ids: list[int]) -> list[BaseException]:
    """Run the trials in threads of this process that start together, as a worker's pool does."""
    start = threading.Barrier(len(trial_ids))
    errors: list[BaseException] = []

    def run(trial_id: int) -> None:
        try:
            start.wait(timeout=30)
            run_trial_by_id(trial_id)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(trial_id,)) for trial_id in trial_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a trial did not finish in 120 s"
    return errors


def test_trials_of_two_projects_each_import_their_own_helper_module(
    transactional_db, proctor_folders, tmp_path: Path
):
    acme = Organization.objects.create(slug="acme", name="Acme")
    globex = Organization.objects.create(slug="globex", name="Globex")
    alpha = record_project(tmp_path / "alpha", "alpha", acme)
    beta = record_project(tmp_path / "beta", "beta", globex)

    assert run_side_by_side([alpha, beta]) == []

    seen = {
        trial.pk: (
            trial.status,
            trial.error,
            *Check.objects.get(trial=trial).message.split(" from "),
        )
        for trial in Trial.objects.filter(pk__in=[alpha, beta])
    }
    unpacked = tmp_path / "proctor-home" / "cache" / "bundles"
    assert seen == {
        alpha: (
            "passed",
            "",
            "alpha",
            str(only_bundle(unpacked / str(acme.pk)) / "evals" / "variants.py"),
        ),
        beta: (
            "passed",
            "",
            "beta",
            str(only_bundle(unpacked / str(globex.pk)) / "evals" / "variants.py"),
        ),
    }


def only_bundle(organization_folder: Path) -> Path:
    """The one project bundle unpacked for an organization (the other holds the agent)."""
    (project,) = [p for p in organization_folder.iterdir() if (p / "evals").is_dir()]
    return project


def test_a_runs_later_trial_runs_from_its_bundle_after_the_cache_was_cleaned(
    transactional_db, proctor_folders, tmp_path: Path
):
    """The trials of a run share what their plan resolves from the bundle, kept by the process;
    a trial that finds the unpacked bundle gone (a cache cleaned between two trials) unpacks it
    again instead of running from a folder that is not there."""
    acme = Organization.objects.create(slug="acme", name="Acme")
    first_id = record_project(tmp_path / "alpha", "alpha", acme, trials=3)
    run_id = Trial.objects.get(pk=first_id).run_id
    first, second, third = (
        Trial.objects.filter(run_id=run_id).order_by("index").values_list("pk", flat=True)
    )
    unpacked = tmp_path / "proctor-home" / "cache" / "bundles"

    run_trial_by_id(first)
    run_trial_by_id(second)
    shutil.rmtree(unpacked)
    run_trial_by_id(third)

    trials = Trial.objects.filter(pk__in=[first, second, third]).order_by("pk")
    assert [(t.status, t.error) for t in trials] == [("passed", "")] * 3
    messages = [Check.objects.get(trial=t).message for t in trials]
    where = str(only_bundle(unpacked / str(acme.pk)) / "evals" / "variants.py")
    assert messages == [f"alpha from {where}"] * 3
