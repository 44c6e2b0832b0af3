"""A task case's trial page (issue 30): each reward and each test its verifier reported is a
check with its score and message, a step's named after the step, with the verifier that
decided it."""

from __future__ import annotations

import pytest
from factories import (
    make_batch,
    make_case,
    make_cast,
    make_definition,
    make_run,
    make_trial,
    make_variant,
    make_version,
)

from evals_app.models import Check

pytestmark = pytest.mark.django_db


def test_a_task_trial_shows_its_steps_rewards_and_tests(client) -> None:
    cast = make_cast()
    definition = make_definition("api", "three-steps")
    definition["checks"] = []
    definition["task"] = {
        "folder": "${PROCTOR_PROJECT}/tasks/three-steps",
        "tests_script": "tests/test.sh",
        "verifier_timeout_s": 600,
        "reward_threshold": 1.0,
        "steps": [{"name": "scaffold", "verifier_timeout_s": 30}],
    }
    run = make_run(
        make_batch(cast.acme, status="finished"),
        make_version(make_case(cast.acme, "three-steps"), definition=definition),
        make_variant(cast.acme, "oracle"),
    )
    trial = make_trial(run, status="failed", score=0.0, threshold=1.0)
    Check.objects.create(
        trial=trial,
        index=0,
        name="scaffold: reward",
        kind="reward",
        passed=False,
        score=0.0,
        message="reward 0 < 1",
    )
    Check.objects.create(
        trial=trial,
        index=1,
        name="scaffold: test_src_exists",
        kind="test",
        passed=False,
        message="src/ is missing",
    )
    client.force_login(cast.alice)

    html = client.get(f"/trials/{trial.pk}/").content.decode()

    assert "scaffold: reward" in html and "score 0.00" in html and "reward 0 &lt; 1" in html
    assert "scaffold: test_src_exists" in html and "src/ is missing" in html
    assert "steps/scaffold/tests/ over the task" in html
    assert "<dt>Lowest reward</dt>" in html
