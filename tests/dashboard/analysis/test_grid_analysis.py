"""The grid's analysis: status filters, search over what trials produced, flaky cells with
their history, pass@k on demand, cost per passed trial, the merged view of reruns, sorting by
the change against the baseline, and "Rerun errored"."""

from __future__ import annotations

import re

import pytest
from factories import add_events, make_batch_with_grid, make_checks

from evals_app.models import Batch, Trial

pytestmark = pytest.mark.django_db

S = Trial.Status


def shown_cases(html: str) -> list[str]:
    return re.findall(r'class="case-name"[^>]*>([\w-]+)<', html)


def cell_of(html: str, run_id: int) -> str:
    match = re.search(rf'<td id="cell-{run_id}".*?</td>', html, re.S)
    assert match, f"no cell for run {run_id}"
    return match.group(0)


def grid(client, batch: Batch, **params) -> str:
    response = client.get(f"/batches/{batch.pk}/", params)
    assert response.status_code == 200
    return response.content.decode()


def test_the_status_filter_hides_cells_that_passed(client, cast):
    outcomes = {0: S.PASSED, 1: S.FAILED, 2: S.ERRORED, 3: S.TIMED_OUT}
    batch = make_batch_with_grid(
        cast.acme,
        cases=4,
        variants=1,
        trials=2,
        status=lambda c, v, t: outcomes[c] if t else S.PASSED,
    )
    client.force_login(cast.alice)
    assert shown_cases(grid(client, batch)) == ["case-000", "case-001", "case-002", "case-003"]
    assert shown_cases(grid(client, batch, status="failed")) == ["case-001"]
    assert shown_cases(grid(client, batch, status="errored")) == ["case-002"]
    assert shown_cases(grid(client, batch, status="timed_out")) == ["case-003"]
    # A pass beside a failure or a time-out is flaky; an errored trial is the infrastructure's
    # doing, not the agent's, so a pass beside it is not.
    assert shown_cases(grid(client, batch, status="flaky")) == ["case-001", "case-003"]
    # The totals count what is shown.
    assert re.search(r'id="grid-total".*?>1/2<', grid(client, batch, status="failed"), re.S)


def test_search_finds_text_in_answers_check_messages_and_transcripts(client, cast, pair):
    runs = {r.case_version.case.slug: r for r in pair.b.runs.select_related("case_version__case")}
    Trial.objects.filter(run=runs["steady-one"], index=0).update(
        answer="I refactored the parser into smaller functions."
    )
    make_checks(
        runs["steady-two"].trials.get(index=1),
        validator_passed=False,
        validator_message="greeting.txt says 'hola mundo'",
    )
    add_events(
        runs["wobbly"].trials.get(index=0), 2, start_seq=50, text="rebuilding the sqlite cache"
    )
    client.force_login(cast.alice)

    assert shown_cases(grid(client, pair.b, q="parser")) == ["steady-one"]
    assert shown_cases(grid(client, pair.b, q="hola")) == ["steady-two"]
    assert shown_cases(grid(client, pair.b, q="sqlite")) == ["wobbly"]
    # The case name still matches, and nothing matches nothing.
    assert shown_cases(grid(client, pair.b, q="planted")) == ["planted"]
    assert shown_cases(grid(client, pair.b, q="zeppelin")) == []
    html = grid(client, pair.b, q="parser")
    assert "cell--matched" in cell_of(html, runs["steady-one"].pk)


def test_a_flaky_cell_shows_its_history_and_pass_at_k_on_demand(client, cast, pair):
    wobbly = pair.b.runs.get(case_version__case__slug="wobbly", variant__name="quick")
    client.force_login(cast.alice)
    cell = cell_of(grid(client, pair.b), wobbly.pk)
    assert "data-flaky" in cell
    assert f"2/3 passed in batch {pair.b.pk}" in cell
    assert (
        f"batch #{pair.a.pk} (A): 3/3 passed" in cell
        and f"batch #{pair.b.pk} (B): 2/3 passed" in cell
    )
    assert "pass@" not in cell

    html = grid(client, pair.b, estimates="1")
    cell = cell_of(html, wobbly.pk)
    # n = 3 trials, c = 2 passed: pass@1 = 2/3, pass@3 = 1 - C(1,3)/C(3,3) = 1, pass^3 = 0.
    assert "pass@1 0.67" in cell and "pass@3 1.00" in cell and "pass^3 0.00" in cell
    assert 'id="estimates-row"' in html
    assert "Hide pass@k" in html


def test_the_footer_shows_cost_per_passed_trial(client, cast, pair):
    client.force_login(cast.alice)
    html = grid(client, pair.b)
    # 23 trials at $0.01 over 19 passes.
    assert re.search(r'id="cost-per-pass"[^>]*>\$0\.0121<', html)


def test_the_merged_view_reads_a_batch_with_its_reruns(client, cast, pair):
    planted = pair.b.runs.get(case_version__case__slug="planted", variant__name="steady")
    rerun = Batch.objects.create(
        organization=cast.acme, parent=pair.b, label="rerun of failed trials"
    )
    new_run = rerun.runs.create(case_version=planted.case_version, variant=planted.variant)
    for index in range(2):
        Trial.objects.create(run=new_run, index=index, status=S.PASSED)
    client.force_login(cast.alice)

    alone = grid(client, pair.b)
    assert ">0/3<" in cell_of(alone, planted.pk)
    assert 'id="trials-mode"' in alone
    # Latest: the rerun's two passes take the place of two of the three failures.
    latest = grid(client, pair.b, trials="latest")
    assert ">2/3<" in cell_of(latest, new_run.pk)
    every = grid(client, pair.b, trials="all")
    assert ">2/5<" in cell_of(every, new_run.pk)


def test_it_sorts_by_the_change_against_the_baseline(client, cast, pair):
    client.force_login(cast.alice)
    assert 'id="sort-delta"' not in grid(client, pair.b)
    pair.a.mark_baseline()
    html = grid(client, pair.b, sort="delta")
    assert shown_cases(html)[:2] == ["planted", "wobbly"]
    planted = pair.b.runs.get(case_version__case__slug="planted", variant__name="steady")
    assert "−100 pp" in cell_of(html, planted.pk)
    assert shown_cases(grid(client, pair.b, sort="-delta"))[-2:] == ["wobbly", "planted"]


def test_rerun_errored_reruns_only_the_errored_trials(client, cast):
    batch = make_batch_with_grid(
        cast.acme,
        cases=2,
        variants=1,
        trials=3,
        status=lambda c, v, t: (S.ERRORED, S.FAILED, S.TIMED_OUT)[t] if c == 0 else S.PASSED,
    )
    client.force_login(cast.alice)
    assert 'id="rerun-errored"' in grid(client, batch)
    response = client.post(f"/batches/{batch.pk}/rerun-errored/")
    rerun = Batch.objects.get(parent=batch)
    assert response["Location"] == f"/batches/{rerun.pk}/"
    assert rerun.label == "rerun of errored trials"
    assert list(
        Trial.objects.filter(run__batch=rerun).values_list(
            "run__case_version__case__slug", flat=True
        )
    ) == ["case-000"]

    clean = make_batch_with_grid(cast.acme, cases=1, variants=1)
    client.post(f"/batches/{clean.pk}/rerun-errored/")
    assert not Batch.objects.filter(parent=clean).exists()
    assert client.post(f"/batches/{batch.pk}/rerun-errored/").status_code == 302
    client.force_login(cast.charlie)
    assert client.post(f"/batches/{batch.pk}/rerun-errored/").status_code == 404


def test_every_view_of_a_big_grid_costs_what_a_small_one_does(
    client, cast, django_assert_max_num_queries
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def family(cases: int) -> Batch:
        """A batch with mixed outcomes and one rerun of it."""
        batch = make_batch_with_grid(
            cast.acme,
            cases=cases,
            variants=2,
            trials=3,
            status=lambda c, v, t: (S.PASSED, S.FAILED, S.ERRORED)[(c + t) % 3],
        )
        make_batch_with_grid(cast.acme, cases=cases, variants=2, trials=1, parent=batch)
        return batch

    small, big = family(3), family(60)
    make_batch_with_grid(cast.acme, cases=60, variants=2, trials=2).mark_baseline()
    client.force_login(cast.alice)
    views = [
        {},
        {"status": "flaky", "estimates": "1"},
        {"q": "step", "status": "failed"},
        {"trials": "latest", "sort": "delta"},
        {"trials": "all", "sort": "-rate", "estimates": "1"},
    ]
    for params in views:
        client.get(f"/batches/{small.pk}/", params)
        with CaptureQueriesContext(connection) as few:
            assert client.get(f"/batches/{small.pk}/", params).status_code == 200
        with django_assert_max_num_queries(len(few)):
            assert client.get(f"/batches/{big.pk}/", params).status_code == 200
