"""A trial's row names its artifacts folder from its first write on: the first flush of a
running trial (its page can list the files while the agent works), or its final row."""

from __future__ import annotations

import pytest
from factories import make_batch_with_grid, make_cast

from evals_app.models import Trial
from proctor.agent_events import AgentEvent
from runner.core.reporting import TrialOutcome
from runner.jobs.database_recorder import DatabaseRecorder

pytestmark = pytest.mark.django_db

OWNER = "test-process"


@pytest.fixture(autouse=True)
def own_artifacts_folder(settings, tmp_path):
    """Ids restart with each test's database: files of an earlier run must not be read."""
    settings.ARTIFACTS_DIR = tmp_path / "artifacts"


def _running_trial() -> Trial:
    batch = make_batch_with_grid(
        make_cast().acme,
        cases=1,
        variants=1,
        trials=1,
        status=lambda c, v, t: Trial.Status.RUNNING,
    )
    trial = Trial.objects.filter(run__batch=batch).get()
    Trial.objects.filter(pk=trial.pk).update(lease_owner=OWNER)
    return Trial.objects.select_related("run").get(pk=trial.pk)


def test_a_running_trial_names_its_folder_at_its_first_flush() -> None:
    trial = _running_trial()
    recorder = DatabaseRecorder(trial, owner=OWNER)
    recorder.trial_started()
    recorder.event(0, AgentEvent("Message", {"role": "assistant", "text": "working"}))
    recorder.flush()
    stored = Trial.objects.get(pk=trial.pk)
    assert stored.status == Trial.Status.RUNNING
    assert stored.artifacts_dir == str(recorder.folder)
    assert (recorder.folder / "events.jsonl").read_text().count("working") == 1
    recorder.trial_finished(TrialOutcome(status="passed"))
    assert Trial.objects.get(pk=trial.pk).artifacts_dir == str(recorder.folder)


def test_a_trial_ended_before_any_flush_names_its_folder_in_its_final_row() -> None:
    trial = _running_trial()
    recorder = DatabaseRecorder(trial, owner=OWNER)
    recorder.trial_started()
    recorder.event(0, AgentEvent("Message", {"role": "assistant", "text": "quick"}))
    recorder.trial_finished(TrialOutcome(status="passed"))
    stored = Trial.objects.get(pk=trial.pk)
    assert stored.status == "passed"
    assert stored.artifacts_dir == str(recorder.folder)
    assert "quick" in (recorder.folder / "events.jsonl").read_text()


def test_a_trial_another_process_took_over_does_not_name_its_folder() -> None:
    trial = _running_trial()
    recorder = DatabaseRecorder(trial, owner=OWNER)
    recorder.trial_started()
    Trial.objects.filter(pk=trial.pk).update(lease_owner="someone-else")
    recorder.event(0, AgentEvent("Message", {"role": "assistant", "text": "late"}))
    recorder.flush()
    recorder.trial_finished(TrialOutcome(status="passed"))
    stored = Trial.objects.get(pk=trial.pk)
    assert stored.artifacts_dir == ""
    assert stored.status == Trial.Status.RUNNING
    assert recorder.lost.is_set()
