"""A stopping `proctor serve` hands back the trials still running past its grace: each is
queued again with its lease released and its attempt not counted, so the next start runs it;
trials other processes run are left to them."""

from __future__ import annotations

import pytest
from api.factories import make_batch, make_case, make_org, make_variant

from evals_app.models import Batch, Trial
from runner.jobs import leases
from runner.jobs.pickup import hand_back_running

pytestmark = pytest.mark.django_db

S = Trial.Status


@pytest.fixture
def batch():
    org = make_org("acme")
    batch = make_batch(org, [make_case(org, "health")], [make_variant(org, "careful")], statuses=[])
    batch.status, batch.finished_at = Batch.Status.QUEUED, None
    batch.save()
    return batch


def test_it_hands_back_the_trials_this_process_runs(batch):
    ours = Trial.objects.create(run=batch.runs.get(), index=0)
    theirs = Trial.objects.create(run=batch.runs.get(), index=1)
    Trial.claim(ours.pk, leases.owner(), lease_s=30, max_attempts=2)
    Trial.claim(theirs.pk, "host-b:202:bbbb", lease_s=30, max_attempts=2)

    with leases.holding(ours.pk):
        given = hand_back_running()

    assert given == [ours.pk]
    ours.refresh_from_db()
    assert (ours.status, ours.lease_owner, ours.lease_expires_at, ours.attempt) == (
        S.QUEUED,
        "",
        None,
        1,
    )
    theirs.refresh_from_db()
    assert (theirs.status, theirs.lease_owner) == (S.RUNNING, "host-b:202:bbbb")
