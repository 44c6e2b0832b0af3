"""A trial left half run by a crashed process is reset before it runs again: nothing it
recorded the first time may be left beside the second attempt's record."""

from __future__ import annotations

from pathlib import Path

import pytest
from api.factories import make_batch, make_case, make_org, make_variant

from evals_app.models import Consultation, Trial, Turn
from runner.jobs.database_recorder import reset_for_retry


@pytest.mark.django_db
def test_a_trial_reset_for_retry_forgets_its_consultations_and_conversation_record(
    settings, tmp_path: Path
) -> None:
    settings.ARTIFACTS_DIR = str(tmp_path / "artifacts")
    org = make_org("acme")
    batch = make_batch(
        org, [make_case(org, "caching")], [make_variant(org, "talker")], statuses=["running"]
    )
    trial = Trial.objects.get(run__batch=batch)
    Trial.objects.filter(pk=trial.pk).update(
        conversation_outcome="stopped",
        stop_cause="responder_cannot_answer",
        responder_cause="declined",
        plan_state="planning",
        plan_signal="",
    )
    Turn.objects.create(trial=trial, index=0, prompt="[ask] add caching", mode="plan")
    Consultation.objects.create(
        trial=trial,
        kind="responder",
        turn_index=0,
        verdict="cannot_answer",
        cause="declined",
        prompt=[{"role": "user", "content": "add caching"}],
    )

    reset_for_retry(trial)

    trial.refresh_from_db()
    assert trial.status == Trial.Status.QUEUED
    assert not trial.turns.exists()
    assert not trial.consultations.exists()
    assert (
        trial.conversation_outcome,
        trial.stop_cause,
        trial.responder_cause,
        trial.plan_state,
    ) == ("", "", "", "")
