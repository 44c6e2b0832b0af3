"""A trial's transcript as an ATIF trajectory.json (issue 30): from the trial page's link and
from ``proctor export BATCH --format atif``, for any trial, task case or not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command
from factories import (
    make_batch,
    make_case,
    make_cast,
    make_run,
    make_trial_with_events,
    make_variant,
    make_version,
)

from evals_app.atif_trajectory import trial_trajectory

pytestmark = pytest.mark.django_db


@pytest.fixture
def cast():
    return make_cast()


@pytest.fixture
def trial(cast):
    batch = make_batch(cast.acme, status="finished")
    run = make_run(
        batch,
        make_version(make_case(cast.acme, "health-route")),
        make_variant(cast.acme, "careful", model="scripted/careful"),
    )
    return make_trial_with_events(run)


def test_the_transcript_becomes_atif_steps(trial) -> None:
    value = trial_trajectory(trial)

    assert value["schema_version"] == "ATIF-v1.4"
    assert value["session_id"] == f"proctor-trial-{trial.pk}"
    assert value["agent"]["model_name"] == "scripted/careful"
    steps = value["steps"]
    assert [s["step_id"] for s in steps] == list(range(1, len(steps) + 1))
    assert [(s["source"], s["message"]) for s in steps] == [
        ("user", "Add a /health route that returns 200"),
        ("agent", "I'll add the route and a test."),
        ("agent", ""),
        ("agent", ""),
        ("user", "Yes, go ahead with the plan."),
        ("agent", "Done: /health returns 200."),
    ]
    command, tool = steps[2], steps[3]
    assert command["tool_calls"] == [
        {"tool_call_id": "call-2", "function_name": "shell", "arguments": {"command": "pytest -q"}}
    ]
    assert command["observation"]["results"] == [
        {"source_call_id": "call-2", "content": "F\n1 failed in 0.1s\n\n[exit 1]"}
    ]
    assert tool["tool_calls"][0]["arguments"] == {"path": "app.py"}
    assert tool["observation"]["results"][0]["content"] == "wrote 12 lines"
    # The usage after the tool call is that step's, and the totals'.
    assert tool["metrics"] == {"prompt_tokens": 900, "completion_tokens": 200}
    assert value["final_metrics"]["total_prompt_tokens"] == 900
    assert value["final_metrics"]["total_steps"] == 6
    assert value["extra"]["proctor"]["agent_session_id"] == "sess-42"


def test_the_trial_page_links_its_trajectory(client, cast, trial) -> None:
    client.force_login(cast.alice)
    assert (
        f'href="/trials/{trial.pk}/trajectory.json"'
        in client.get(f"/trials/{trial.pk}/").content.decode()
    )

    response = client.get(f"/trials/{trial.pk}/trajectory.json")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="trajectory.json"'
    assert json.loads(response.content)["steps"][0]["message"].startswith("Add a /health")

    client.force_login(cast.charlie)
    assert client.get(f"/trials/{trial.pk}/trajectory.json").status_code == 404


def test_proctor_export_writes_every_trial_of_a_batch(cast, trial, tmp_path: Path) -> None:
    batch = trial.run.batch
    call_command("export", str(batch.pk), "--out", str(tmp_path / "out"), "--org", cast.acme.slug)

    index = json.loads((tmp_path / "out" / "index.json").read_text())
    assert index["trials"] == [
        {
            "trial": trial.pk,
            "case": "health-route",
            "variant": "careful",
            "status": "passed",
            "trajectory": f"trial-{trial.pk}/trajectory.json",
        }
    ]
    written = json.loads((tmp_path / "out" / f"trial-{trial.pk}" / "trajectory.json").read_text())
    assert written == json.loads(json.dumps(trial_trajectory(trial)))
