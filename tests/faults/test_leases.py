"""Leases on the models: a trial is claimed under a lease, its worker's heartbeat renews it,
and once it lapses the reaper re-queues the trial (attempt 2) or ends it ``worker_lost``; a run
that lost its lease records nothing over the new one."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from api.factories import make_batch, make_case, make_events, make_org, make_user, make_variant
from django.utils import timezone

from evals_app.models import Batch, Run, Trial
from runner.jobs import leases, reaper

pytestmark = pytest.mark.django_db

S = Trial.Status
ALICE_WORKER = "host-a:101:aaaa"
BOB_WORKER = "host-b:202:bbbb"


@pytest.fixture
def batch():
    org = make_org("acme")
    return make_batch(org, [make_case(org, "health")], [make_variant(org, "careful")], statuses=[])


def queued_trial(batch: Batch, index: int = 0) -> Trial:
    batch.status = Batch.Status.QUEUED
    batch.finished_at = None
    batch.save()
    return Trial.objects.create(run=batch.runs.get(), index=index)


def claim(trial: Trial, owner: str = ALICE_WORKER, *, max_attempts: int = 2) -> Trial | None:
    return Trial.claim(trial.pk, owner, lease_s=30, max_attempts=max_attempts)


def expire(trial: Trial) -> None:
    Trial.objects.filter(pk=trial.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_it_claims_a_queued_trial_under_a_lease(batch):
    trial = queued_trial(batch)
    before = timezone.now()

    claimed = claim(trial)

    assert claimed is not None
    assert (claimed.status, claimed.attempt, claimed.lease_owner) == (S.RUNNING, 1, ALICE_WORKER)
    # The lease runs lease_s from the claim: measured from a moment before it, never after (a
    # busy machine can take seconds between the claim and this line).
    assert before + timedelta(seconds=30) <= claimed.lease_expires_at
    assert Batch.objects.get(pk=batch.pk).status == Batch.Status.RUNNING


def test_the_claimed_trial_is_the_row_as_stored(batch):
    """What the claim hands back is the row as it now stands: the columns the claim set, and
    any other read from the database when asked for."""
    trial = queued_trial(batch, index=3)
    Trial.objects.filter(pk=trial.pk).update(answer="from before")

    claimed = claim(trial)

    assert claimed is not None
    stored = Trial.objects.get(pk=trial.pk)
    for field in ("pk", "run_id", "index", "attempt", "status", "started_at", "lease_owner"):
        assert getattr(claimed, field) == getattr(stored, field), field
    assert claimed.lease_expires_at == stored.lease_expires_at
    assert claimed.run.pk == stored.run_id
    assert claimed.answer == "from before"
    assert claimed.queued_at == stored.queued_at


def test_a_claim_reads_its_run_again_once_the_run_is_not_the_kept_one(batch):
    """Runs are kept per process between claims; the claim's own statement says whether the
    kept one is still the run of that id (a database emptied and filled again reuses ids)."""
    first = claim(queued_trial(batch, index=0))
    assert first is not None
    again = claim(queued_trial(batch, index=1))
    assert again is not None
    assert again.run is first.run  # kept: the same object, not read again
    other = make_variant(batch.organization, "other")
    Run.objects.filter(pk=first.run_id).update(variant=other)  # now another run at this id

    changed = claim(queued_trial(batch, index=2))

    assert changed is not None
    assert changed.run is not first.run
    assert changed.run.variant_id == other.pk


def test_it_does_not_take_a_trial_whose_lease_is_fresh(batch):
    trial = queued_trial(batch)
    claim(trial)

    assert claim(trial, BOB_WORKER) is None
    assert Trial.objects.get(pk=trial.pk).lease_owner == ALICE_WORKER


def test_a_redelivered_message_takes_over_a_trial_whose_lease_expired(batch):
    trial = queued_trial(batch)
    claim(trial)
    make_events(trial, 3)
    expire(trial)

    taken = claim(trial, BOB_WORKER)

    assert taken is not None
    assert (taken.status, taken.attempt, taken.lease_owner) == (S.RUNNING, 2, BOB_WORKER)
    assert not taken.events.exists()  # the lost run's partial record is forgotten


def test_a_redelivered_message_leaves_a_lost_trial_with_no_attempts_left_to_the_reaper(batch):
    trial = queued_trial(batch)
    claim(trial)
    expire(trial)

    assert claim(trial, BOB_WORKER, max_attempts=1) is None
    assert Trial.objects.get(pk=trial.pk).status == S.RUNNING


def test_the_heartbeat_renews_only_its_own_running_trials_in_one_update(
    batch, django_assert_num_queries
):
    mine = [queued_trial(batch, index) for index in range(3)]
    theirs = queued_trial(batch, 3)
    for trial in mine:
        claim(trial)
    claim(theirs, BOB_WORKER)
    for trial in [*mine, theirs]:
        expire(trial)

    with django_assert_num_queries(1):
        renewed = Trial.renew_leases(ALICE_WORKER, [t.pk for t in [*mine, theirs]], lease_s=30)

    assert renewed == 3
    assert Trial.objects.get(pk=theirs.pk).lease_expired()
    assert all(not Trial.objects.get(pk=t.pk).lease_expired() for t in mine)


def test_the_process_heartbeat_renews_the_trials_it_holds(batch, settings):
    trial = queued_trial(batch)
    claimed = Trial.claim(trial.pk, leases.owner(), lease_s=30, max_attempts=2)
    assert claimed is not None
    expire(trial)

    with leases.holding(trial.pk):
        assert trial.pk in leases.held()
        assert leases.renew_now() == 1
    assert trial.pk not in leases.held()
    assert not Trial.objects.get(pk=trial.pk).lease_expired()


def test_a_finish_by_a_run_that_lost_its_lease_does_not_overwrite_the_new_run(batch):
    trial = queued_trial(batch)
    claim(trial)
    expire(trial)
    claim(trial, BOB_WORKER)

    recorded = Trial(pk=trial.pk).finish(S.FAILED, owner=ALICE_WORKER, error="late")

    assert recorded is False
    after = Trial.objects.get(pk=trial.pk)
    assert (after.status, after.error, after.lease_owner) == (S.RUNNING, "", BOB_WORKER)
    assert Trial(pk=trial.pk).finish(S.PASSED, owner=BOB_WORKER) is True
    after.refresh_from_db()
    assert (after.status, after.lease_owner, after.lease_expires_at) == (S.PASSED, "", None)


def test_the_reaper_requeues_a_lost_trial_then_ends_it_worker_lost(
    batch, settings, tmp_path: Path, monkeypatch
):
    settings.ARTIFACTS_DIR = str(tmp_path / "artifacts")
    settings.PROCTOR_MAX_ATTEMPTS = 2
    enqueued: list[list[int]] = []
    monkeypatch.setattr(reaper, "enqueue", lambda ids: enqueued.append(list(ids)))
    trial = queued_trial(batch)
    claim(trial)
    make_events(trial, 2)
    folder = tmp_path / "artifacts" / "batches" / str(batch.pk) / "trials" / str(trial.pk)
    folder.mkdir(parents=True)
    expire(trial)

    assert reaper.reap() == ([trial.pk], [])

    again = Trial.objects.get(pk=trial.pk)
    assert (again.status, again.attempt, again.lease_owner) == (S.QUEUED, 2, "")
    assert not again.events.exists() and not folder.exists()
    assert enqueued == [[trial.pk]]
    assert again.worker_lost_note == "worker lost, retried (attempt 2)"

    claim(again, BOB_WORKER)
    expire(again)
    assert reaper.reap() == ([], [trial.pk])

    lost = Trial.objects.get(pk=trial.pk)
    assert (lost.status, lost.finish_reason, lost.attempt) == (S.ERRORED, "worker_lost", 2)
    assert "no attempts are left" in lost.error
    assert Batch.objects.get(pk=batch.pk).status == Batch.Status.FINISHED  # the batch finishes


def test_the_reaper_leaves_fresh_leases_and_its_own_trials_alone(batch, monkeypatch):
    monkeypatch.setattr(reaper, "enqueue", lambda ids: None)
    fresh = queued_trial(batch, 0)
    claim(fresh, BOB_WORKER)
    own = queued_trial(batch, 1)
    Trial.claim(own.pk, leases.owner(), lease_s=30, max_attempts=2)
    expire(own)  # a heartbeat late by a locked database: this process still runs it

    with leases.holding(own.pk):
        assert reaper.reap() == ([], [])


def test_the_trial_page_and_the_grid_say_the_worker_was_lost(batch, client):
    user = make_user("alice", batch.organization)
    trial = queued_trial(batch)
    Trial.objects.filter(pk=trial.pk).update(status=S.PASSED, attempt=2)
    client.force_login(user)

    assert "worker lost, retried (attempt 2)" in client.get(f"/trials/{trial.pk}/").content.decode()
    assert (
        "worker lost, retried (attempt 2)" in client.get(f"/batches/{batch.pk}/").content.decode()
    )
