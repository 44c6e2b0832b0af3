"""The grid is ordered and paged by the database: a page beyond the first shows the rows a
reader expects after the first, sorted by pass rate across pages, the totals and estimates
count every row the filters keep, and the query count does not grow with the batch."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import make_batch_with_grid, make_cast

from evals_app.models import Run, Trial

pytestmark = pytest.mark.django_db

S = Trial.Status
TRIALS = 4


def _passes(case: int) -> int:
    """How many of a case's trials pass under variant 0: 0 to 4, many ties."""
    return (case * 7) % (TRIALS + 1)


def _status(case: int, variant: int, trial: int) -> str:
    if case % 17 == 5:
        return S.RUNNING  # nothing finished: the row goes last in either direction
    if variant == 1:
        return S.PASSED if trial < 2 else S.FAILED
    return S.PASSED if trial < _passes(case) else S.FAILED


def _shown(html: str) -> list[str]:
    return re.findall(r'class="case-name"[^>]*>([^<]+)<', html)


def _expected(cases: int, descending: bool) -> list[str]:
    """The reader's order: by the row's pass rate (both variants), ties by name, rows with
    nothing finished last."""
    rated, unfinished = [], []
    for case in range(cases):
        slug = f"case-{case:03d}"
        if case % 17 == 5:
            unfinished.append(slug)
            continue
        rate = (_passes(case) + 2) / (2 * TRIALS)
        rated.append((-rate if descending else rate, slug))
    return [slug for _, slug in sorted(rated)] + unfinished


def _all_pages(client, batch, params: dict) -> list[str]:
    html = client.get(f"/batches/{batch.pk}/", params).content.decode()
    shown = _shown(html)
    while match := re.search(r'<tr id="grid-more" hx-get="([^"]+)"', html):
        html = client.get(
            f"/batches/{batch.pk}/{match.group(1).replace('&amp;', '&')}", HTTP_HX_REQUEST="true"
        ).content.decode()
        shown += _shown(html)
    return shown


# "batch": one page at a time from the database; "latest" (merged with reruns, here none): the
# rows read whole and narrowed in memory. The reader sees no difference.
READ_IN_SQL_AND_WHOLE = pytest.mark.parametrize("trials", ["batch", "latest"])


@READ_IN_SQL_AND_WHOLE
@pytest.mark.parametrize("sort", ["rate", "-rate"])
def test_the_second_page_continues_the_pass_rate_order_of_the_first(client, sort, trials):
    cast = make_cast()
    batch = make_batch_with_grid(cast.acme, cases=230, variants=2, trials=TRIALS, status=_status)
    client.force_login(cast.alice)

    shown = _all_pages(client, batch, {"sort": sort, "trials": trials})

    assert shown == _expected(230, descending=sort.startswith("-"))


def test_sorting_by_one_variant_pages_by_that_column(client):
    cast = make_cast()
    batch = make_batch_with_grid(cast.acme, cases=150, variants=2, trials=TRIALS, status=_status)
    first_variant = Run.objects.filter(batch=batch).order_by("variant__name").first().variant
    client.force_login(cast.alice)

    shown = _all_pages(client, batch, {"sort": f"-v{first_variant.pk}"})

    rated = sorted(
        (-_passes(c), f"case-{c:03d}") for c in range(150) if c % 17 != 5
    )  # worst last: best first
    assert shown == [slug for _, slug in rated] + [
        f"case-{c:03d}" for c in range(150) if c % 17 == 5
    ]


def test_the_status_filter_pages_only_the_rows_it_keeps_and_counts_them(client):
    cast = make_cast()
    # Cases 0-119 pass everything; from 120 on every other case has a failure.
    batch = make_batch_with_grid(
        cast.acme,
        cases=260,
        variants=2,
        trials=2,
        status=lambda c, v, t: S.FAILED if c >= 120 and c % 2 and v == 0 else S.PASSED,
    )
    client.force_login(cast.alice)

    html = client.get(f"/batches/{batch.pk}/", {"status": "failed"}).content.decode()
    assert "70 of 260 cases" in html
    shown = _all_pages(client, batch, {"status": "failed"})
    assert shown == [f"case-{c:03d}" for c in range(120, 260) if c % 2]
    # The batch total counts the trials of the 70 rows kept (2 variants x 2 trials each), the
    # second variant's passing.
    assert re.search(r'id="grid-total".*?>140/280<', html, re.S)


@READ_IN_SQL_AND_WHOLE
def test_the_footer_estimates_cover_every_row_not_only_the_first_page(client, trials):
    cast = make_cast()
    # The first 100 rows (the first page) pass; the other 30 fail: pass@1 is 100/130.
    batch = make_batch_with_grid(
        cast.acme,
        cases=130,
        variants=1,
        trials=3,
        status=lambda c, v, t: S.PASSED if c < 100 else S.FAILED,
    )
    client.force_login(cast.alice)

    html = client.get(
        f"/batches/{batch.pk}/", {"estimates": "1", "trials": trials}
    ).content.decode()

    assert html.count('class="case-name"') == 100
    assert f"pass@3 {100 / 130:.2f}" in html


@pytest.mark.parametrize(
    "params",
    [
        {"sort": "rate"},
        {"sort": "-v0"},
        {"status": "failed"},
        {"status": "flaky"},
        {"estimates": "1"},
    ],
)
def test_a_sorted_or_filtered_grid_costs_the_same_queries_at_ten_times_the_rows(client, params):
    cast = make_cast()
    small = make_batch_with_grid(cast.acme, cases=20, variants=2, trials=3, status=_status)
    big = make_batch_with_grid(cast.globex, cases=230, variants=2, trials=3, status=_status)

    def queries(user, batch) -> int:
        client.force_login(user)
        wanted = dict(params)
        if wanted.get("sort") == "-v0":
            variant = Run.objects.filter(batch=batch).order_by("variant__name").first().variant
            wanted["sort"] = f"-v{variant.pk}"
        client.get(f"/batches/{batch.pk}/", wanted)  # warm caches
        with CaptureQueriesContext(connection) as captured:
            assert client.get(f"/batches/{batch.pk}/", wanted).status_code == 200
        return len(captured)

    assert queries(cast.charlie, big) == queries(cast.alice, small)
