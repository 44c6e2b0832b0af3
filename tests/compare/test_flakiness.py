"""Flaky cells: mixed outcomes within a cell's trials, or across batches of the same case
version and the same agent, with the history that shows it."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from compare.seeding import E, F, P, Seed
from evals_app.flakiness import flaky_cells, flaky_list
from evals_app.models import Run

pytestmark = pytest.mark.django_db


def test_two_passes_in_three_is_flaky_within_the_batch():
    seed = Seed()
    batch = seed.batch({("fix-add", "careful"): [P, P, F], ("fix-add", "hasty"): [P, P, P]})

    flaky = flaky_cells(batch)

    (run_id,) = flaky
    assert Run.objects.get(pk=run_id).variant.name == "careful"
    history = flaky[run_id]
    assert history.mixed_within_batch and not history.mixed_across_batches
    assert history.reason == f"2/3 passed in batch {batch.pk}"


def test_the_same_agent_passing_then_failing_is_flaky_across_batches():
    seed = Seed()
    first = seed.batch({("fix-add", "careful"): [P, P]})
    second = seed.batch({("fix-add", "careful"): [F, F]})

    (history,) = flaky_cells(second).values()

    assert not history.mixed_within_batch and history.mixed_across_batches
    assert [h.batch_id for h in history.history] == [first.pk, second.pk]
    assert history.reason == "2/4 over 2 batches"


def test_a_changed_agent_or_case_version_starts_a_new_history():
    seed = Seed()
    seed.batch({("fix-add", "careful"): [P, P]})
    changed_agent = seed.batch(
        {("fix-add", "careful"): [F, F]}, variants={"careful": {"digest": "d2"}}
    )
    new_version = seed.batch({("fix-add", "careful"): [F, F]}, versions={"fix-add": 2})

    assert flaky_cells(changed_agent) == {}
    assert flaky_cells(new_version) == {}


def test_errored_trials_do_not_make_a_cell_flaky():
    seed = Seed()
    batch = seed.batch({("fix-add", "careful"): [P, E, P]})
    assert flaky_cells(batch) == {}


def test_the_suite_list_puts_the_most_uncertain_first_in_a_fixed_number_of_queries():
    seed = Seed()
    seed.batch({("a", "v"): [P, P, P, F], ("b", "v"): [P, F], ("c", "v"): [P, P]})
    seed.batch({("a", "v"): [P], ("b", "v"): [F, P], ("c", "v"): [P]})
    seed.batch({("other", "v"): [P, F]}, suite="greeter")

    with CaptureQueriesContext(connection) as queries:
        listed = flaky_list(seed.org, "calc")

    assert [(h.case, h.passed, h.graded) for h in listed] == [("b", 2, 4), ("a", 4, 5)]
    assert len(queries) == 2
    assert listed[0].to_dict()["history"][0]["graded"] == 2
