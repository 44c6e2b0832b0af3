"""The batch page of an adaptive batch says how many trials it ran and how many it saved
against running every cell to its maximum."""

from __future__ import annotations

import pytest
from compare.seeding import F, P, Seed
from django.contrib.auth.models import User

from evals_app.models import Run

pytestmark = pytest.mark.django_db

RULE = {"min": 7, "max": 12, "threshold": 0.5, "confidence": 0.95}


@pytest.fixture
def seed() -> Seed:
    return Seed()


@pytest.fixture
def alice(seed) -> User:
    user = User.objects.create_user(username="alice")
    seed.org.members.add(user)
    return user


def test_the_page_says_how_many_trials_were_saved(client, alice, seed):
    batch = seed.batch(
        {
            ("always-passes", "command"): [P] * 7,
            ("always-fails", "command"): [F] * 7,
            ("coin", "command"): [P, F] * 6,
        },
        options={"adaptive": True},
    )
    Run.objects.filter(batch=batch).update(adaptive=RULE)
    client.force_login(alice)

    html = client.get(f"/batches/{batch.pk}/").content.decode()

    assert (
        "Adaptive trials: 26 run, 10 saved against 36 at the maximum in all 3 cells; 1 cell "
        "undecided at the maximum." in html
    )


def test_a_batch_of_fixed_trial_counts_says_nothing_of_it(client, alice, seed):
    batch = seed.batch({("coin", "command"): [P, F, P]})
    client.force_login(alice)

    html = client.get(f"/batches/{batch.pk}/").content.decode()

    assert "Adaptive trials" not in html
