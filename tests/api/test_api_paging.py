"""The API's lists page by keyset (``?cursor=``), never by offset: following the next links
reads every row once in the list's order, the previous links read them back, rows that tie on
the order are neither lost nor repeated at a page's edge, and a cursor the API never gave is
one sentence (400)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from dashboard.api.paging import BAD_CURSOR
from evals_app.models import Batch, Run, Trial

from .factories import make_batch, make_case, make_variant

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_pages(monkeypatch):
    monkeypatch.setattr("dashboard.api.paging.KeysetPagination.page_size", 4)


def api_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def follow(client: APIClient, url: str, link: str) -> tuple[list[int], list[dict]]:
    """Every row's id reached by following ``link`` from ``url``, and each page's envelope."""
    ids, pages = [], []
    while url:
        response = client.get(url)
        assert response.status_code == 200, response.content
        page = response.json()
        pages.append(page)
        rows = [row["id"] for row in page["results"]]
        ids += rows if link == "next" else rows[::-1]
        url = page[link]
    return ids, pages


def test_next_links_read_every_trial_once_in_order_and_previous_links_read_them_back(
    alice, acme, small_pages
):
    cases = [make_case(acme, f"case-{n}") for n in range(3)]
    variants = [make_variant(acme, f"agent-{n}") for n in range(2)]
    make_batch(acme, cases, variants, statuses=["passed", "failed", "errored"])
    client = api_for(alice)
    expected = list(Trial.objects.order_by("run_id", "index", "id").values_list("id", flat=True))

    forward, pages = follow(client, "/api/trials/", "next")

    assert forward == expected  # 18 trials, ties on run_id across every page edge
    assert len(pages) == 5 and pages[0]["previous"] is None and pages[-1]["next"] is None
    assert set(pages[0]) == {"next", "previous", "results"}
    backward, _ = follow(client, pages[-1]["previous"], "previous")
    last_page = [row["id"] for row in pages[-1]["results"]]
    assert backward[::-1] + last_page == expected


def test_newest_batches_come_first_across_pages(alice, acme, small_pages):
    case, variant = make_case(acme, "only"), make_variant(acme, "agent")
    for _ in range(9):
        make_batch(acme, [case], [variant], statuses=["passed"])
    expected = list(Batch.objects.order_by("-created_at", "-id").values_list("id", flat=True))

    assert follow(api_for(alice), "/api/batches/", "next")[0] == expected
    assert follow(api_for(alice), "/api/analysis/batches/", "next")[0] == expected


def test_a_filtered_list_keeps_its_filter_in_the_links(alice, acme, small_pages):
    cases = [make_case(acme, f"case-{n}") for n in range(5)]
    variant = make_variant(acme, "agent")
    batch = make_batch(acme, cases, [variant], statuses=["passed"])
    make_batch(acme, cases, [variant], statuses=["passed"])

    ids, pages = follow(api_for(alice), f"/api/runs/?batch={batch.pk}", "next")

    assert ids == list(batch.runs.order_by("id").values_list("id", flat=True))
    assert all(f"batch={batch.pk}" in page["next"] for page in pages[:-1])
    assert Run.objects.count() == 10


# Not base64 JSON; no position; a position of the wrong length; of the wrong types.
@pytest.mark.parametrize(
    "cursor",
    [
        "nonsense",
        "eyJiIjpmYWxzZX0",
        "eyJiIjpmYWxzZSwicCI6WzFdfQ",
        "eyJiIjogZmFsc2UsICJwIjogWyJ4IiwgInkiLCAieiJdfQ",
    ],
)
def test_a_cursor_the_api_never_gave_is_one_sentence(alice, acme, cursor):
    response = api_for(alice).get("/api/trials/", {"cursor": cursor})

    assert response.status_code == 400
    assert response.json() == {"cursor": BAD_CURSOR}
