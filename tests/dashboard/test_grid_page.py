"""The home page: the case x variant grid of a batch."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import (
    PASSWORD,
    make_batch,
    make_batch_with_grid,
    make_case,
    make_cast,
    make_run,
    make_trial,
    make_variant,
    make_version,
)

from evals_app.models import Trial

pytestmark = pytest.mark.django_db

S = Trial.Status


def cell_html(html: str, run_id: int) -> str:
    match = re.search(rf'<td id="cell-{run_id}".*?</td>', html, re.S)
    assert match, f"no cell for run {run_id}"
    return match.group(0)


def test_it_sends_a_signed_out_visitor_to_the_sign_in_page(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=/")


def test_it_signs_alice_in_and_out(client):
    cast = make_cast(alice_password=PASSWORD)
    page = client.get("/login/")
    assert b"Sign in to Proctor" in page.content
    wrong = client.post("/login/", {"username": "alice", "password": "wrong"})
    assert wrong.status_code == 200 and b"enter a correct username and password" in wrong.content
    response = client.post("/login/", {"username": "alice", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/"
    response = client.post("/logout/")
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert client.get("/").status_code == 302
    assert cast.alice.is_active


def test_it_says_how_to_start_when_there_is_no_batch(client):
    cast = make_cast()
    client.force_login(cast.alice)
    response = client.get("/")
    assert response.status_code == 200
    assert b"No batches yet" in response.content
    assert b"proctor eval" in response.content


def test_it_shows_the_latest_batch_with_passed_over_total_per_cell(client):
    cast = make_cast()
    make_batch_with_grid(cast.acme, cases=2, variants=2, trials=3, label="older")
    latest = make_batch_with_grid(
        cast.acme,
        cases=2,
        variants=2,
        trials=3,
        label="newest",
        status=lambda c, v, t: S.PASSED if t < c + 1 else S.FAILED,
    )
    client.force_login(cast.bob)
    html = client.get("/").content.decode()

    assert "newest" in html
    runs = list(latest.runs.order_by("id"))
    # case-000 passes 1 of 3 under both variants, case-001 passes 2 of 3.
    assert ">1/3<" in cell_html(html, runs[0].pk)
    assert ">2/3<" in cell_html(html, runs[2].pk)
    assert f'href="/runs/{runs[0].pk}/"' in cell_html(html, runs[0].pk)
    # Row and column totals, and the whole batch.
    assert re.search(rf'id="row-total-{runs[0].case_version_id}".*?33%.*?2/6', html, re.S)
    assert re.search(rf'id="col-total-{runs[0].variant_id}".*?50%.*?3/6', html, re.S)
    assert re.search(r'id="grid-total".*?50%.*?6/12', html, re.S)


def test_it_marks_timed_out_and_errored_trials_apart_from_failures(client):
    cast = make_cast()
    batch = make_batch(cast.acme)
    run = make_run(
        batch, make_version(make_case(cast.acme, "slow-case")), make_variant(cast.acme, "careful")
    )
    make_trial(run, 0, S.PASSED)
    make_trial(run, 1, S.TIMED_OUT)
    make_trial(run, 2, S.ERRORED, error="the sandbox could not start")
    make_trial(run, 3, S.FAILED)
    client.force_login(cast.alice)
    cell = cell_html(client.get("/").content.decode(), run.pk)

    assert ">1/4<" in cell
    assert 'title="1 timed out"' in cell
    assert 'title="1 errored"' in cell
    # Tokens and duration on hover.
    assert "1,500 tokens per trial" in cell
    assert "40 s per trial" in cell
    # The colour scale: 1 of 4 finished trials passed.
    assert "--rate: 0.250" in cell


def test_it_shows_a_cell_with_nothing_finished_as_pending(client):
    cast = make_cast()
    batch = make_batch_with_grid(
        cast.acme, cases=1, variants=1, trials=2, status=lambda c, v, t: S.QUEUED
    )
    client.force_login(cast.alice)
    cell = cell_html(client.get("/").content.decode(), batch.runs.get().pk)
    assert "cell--pending" in cell
    assert "--rate" not in cell
    assert "2 not finished" in cell


def test_it_opens_another_batch_from_the_picker(client):
    cast = make_cast()
    older = make_batch_with_grid(cast.acme, cases=1, variants=1, label="the older one")
    make_batch_with_grid(cast.acme, cases=1, variants=1, label="the newer one")
    client.force_login(cast.alice)

    html = client.get("/", {"batch": older.pk}).content.decode()
    assert re.search(rf'<option value="{older.pk}" selected>', html)
    assert f"cell-{older.runs.get().pk}" in html
    assert client.get(f"/batches/{older.pk}/").status_code == 200


def test_it_filters_rows_by_suite_tag_and_search(client):
    cast = make_cast()
    batch = make_batch_with_grid(
        cast.acme,
        cases=6,
        variants=1,
        suites=("api", "cli"),
        tags=lambda i: ["slow"] if i % 3 == 0 else [],
    )
    client.force_login(cast.alice)

    def shown(**params) -> set[str]:
        html = client.get(f"/batches/{batch.pk}/", params).content.decode()
        return set(re.findall(r'class="case-name"[^>]*>(case-\d+)<', html))

    assert shown() == {f"case-00{i}" for i in range(6)}
    assert shown(suite="cli") == {"case-001", "case-003", "case-005"}
    assert shown(tag="slow") == {"case-000", "case-003"}
    assert shown(q="005") == {"case-005"}
    assert shown(suite="api", tag="slow") == {"case-000"}


def test_it_sorts_rows_by_pass_rate(client):
    cast = make_cast()
    # case i passes i of 3 trials
    batch = make_batch_with_grid(
        cast.acme,
        cases=4,
        variants=1,
        trials=3,
        status=lambda c, v, t: S.PASSED if t < c else S.FAILED,
    )
    client.force_login(cast.alice)

    def order(sort: str) -> list[str]:
        html = client.get(f"/batches/{batch.pk}/", {"sort": sort}).content.decode()
        return re.findall(r'class="case-name"[^>]*>(case-\d+)<', html)

    assert order("rate") == ["case-000", "case-001", "case-002", "case-003"]
    assert order("-rate") == ["case-003", "case-002", "case-001", "case-000"]
    variant = batch.runs.first().variant
    assert order(f"-v{variant.pk}") == ["case-003", "case-002", "case-001", "case-000"]


def test_it_answers_a_filter_from_htmx_with_the_grid_fragment_only(client):
    cast = make_cast()
    batch = make_batch_with_grid(cast.acme, cases=2, variants=1)
    client.force_login(cast.alice)
    response = client.get(
        f"/batches/{batch.pk}/", {"q": "001"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="grid"
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="grid"')
    assert "<html" not in html
    assert "case-001" in html and "case-000" not in html


def test_it_subscribes_an_unfinished_batch_to_live_updates(client):
    cast = make_cast()
    running = make_batch_with_grid(cast.acme, cases=1, variants=1, status=lambda c, v, t: S.RUNNING)
    client.force_login(cast.alice)
    html = client.get(f"/batches/{running.pk}/").content.decode()
    assert 'hx-ext="ws"' in html
    assert f'ws-connect="/ws/batches/{running.pk}/?watch=grid&amp;since=' in html

    running.status = "finished"
    running.save()
    assert "ws-connect" not in client.get(f"/batches/{running.pk}/").content.decode()


def test_it_answers_404_for_another_organizations_batch(client):
    cast = make_cast()
    batch = make_batch_with_grid(cast.acme, cases=1, variants=1)
    client.force_login(cast.charlie)
    assert client.get(f"/batches/{batch.pk}/").status_code == 404
    assert client.get("/", {"batch": batch.pk}).status_code == 404
    # charlie's own home page knows nothing of acme.
    assert b"No batches yet" in client.get("/").content


def test_it_renders_a_big_grid_in_as_few_queries_as_a_small_one(
    client, django_assert_max_num_queries
):
    cast = make_cast()
    small = make_batch_with_grid(cast.acme, cases=3, variants=2, trials=2)
    big = make_batch_with_grid(
        cast.acme,
        cases=120,
        variants=8,
        trials=5,
        status=lambda c, v, t: (S.PASSED, S.FAILED, S.TIMED_OUT, S.ERRORED)[(c + v + t) % 4],
    )
    client.force_login(cast.alice)
    client.get(f"/batches/{small.pk}/")  # warm caches (content types, templates)

    with CaptureQueriesContext(connection) as small_queries:
        assert client.get(f"/batches/{small.pk}/").status_code == 200
    with django_assert_max_num_queries(len(small_queries)):
        response = client.get(f"/batches/{big.pk}/")
    assert response.status_code == 200
    # The first 100 rows; the totals still count every case.
    assert response.content.count(b'class="cell"') == 100 * 8
    assert re.search(r'id="grid-total".*?>1200/4800<', response.content.decode(), re.S)


def test_it_loads_further_rows_as_the_reader_scrolls(client):
    cast = make_cast()
    batch = make_batch_with_grid(cast.acme, cases=130, variants=1, trials=1)
    client.force_login(cast.alice)
    html = client.get(f"/batches/{batch.pk}/", {"sort": "-rate"}).content.decode()
    assert html.count('class="case-name"') == 100
    more = re.search(r'<tr id="grid-more" hx-get="([^"]+)"', html).group(1).replace("&amp;", "&")
    assert "sort=-rate" in more and "offset=100" in more

    rest = client.get(f"/batches/{batch.pk}/{more}", HTTP_HX_REQUEST="true").content.decode()
    assert rest.lstrip().startswith("<tr")
    assert rest.count('class="case-name"') == 30
    assert "grid-more" not in rest
