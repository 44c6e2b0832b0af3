"""A trial's events go with it: deleting a batch deletes its trials' events, and a trial reset
for a new attempt loses its own (their rows carry no database foreign key:
evals_app.models.Event.trial); the other trials' events stay."""

from __future__ import annotations

from evals_app.models import Batch, Event, Trial

from .factories import make_batch, make_case, make_events, make_variant


def _batch_with_events(org, slug: str) -> Batch:
    batch = make_batch(org, [make_case(org, slug)], [make_variant(org, f"{slug}-agent")])
    for trial in Trial.objects.filter(run__batch=batch):
        make_events(trial, 3)
    return batch


def test_deleting_a_batch_deletes_its_trials_events_only(acme) -> None:
    gone = _batch_with_events(acme, "gone")
    kept = _batch_with_events(acme, "kept")

    gone.delete()

    assert not Event.objects.filter(trial__run__batch_id=gone.pk).exists()
    assert Event.objects.count() == Event.objects.filter(trial__run__batch=kept).count() == 9


def test_a_trial_reset_for_a_new_attempt_loses_only_its_own_events(acme) -> None:
    batch = _batch_with_events(acme, "crashed")
    first, *others = Trial.objects.filter(run__batch=batch).order_by("pk")

    first.reset()

    assert not first.events.exists()
    assert [t.events.count() for t in others] == [3, 3]
