"""The pages a reader opens most cost the same number of queries at 10x the trials, come
compressed, and a 10,000-event transcript arrives a page at a time."""

from __future__ import annotations

import gzip

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import add_events, make_batch_with_grid, make_cast

from dashboard.transcript_paging import PAGE_SIZE
from evals_app.models import Event, Run, Trial

pytestmark = pytest.mark.django_db

S = Trial.Status


def _mixed(c: int, v: int, t: int) -> str:
    return (S.PASSED, S.FAILED, S.TIMED_OUT, S.ERRORED)[(c + v + t) % 4]


def _pages(batch) -> dict[str, str]:
    run = Run.objects.filter(batch=batch).order_by("id").first()
    assert run is not None
    trial = run.trials.order_by("index").first()
    assert trial is not None
    return {
        "grid": f"/batches/{batch.pk}/",
        "run": f"/runs/{run.pk}/",
        "trial": f"/trials/{trial.pk}/",
        "api batches": "/api/batches/",
        "api runs": f"/api/runs/?batch={batch.pk}",
        "api trials": f"/api/trials/?batch={batch.pk}",
    }


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(queries)


# Not named "page": that is pytest-playwright's fixture, and the plugin would make this a
# browser test.
@pytest.mark.parametrize("which", ["grid", "run", "trial", "api batches", "api runs", "api trials"])
def test_a_page_costs_the_same_queries_at_ten_times_the_trials(client, which):
    cast = make_cast()
    small = make_batch_with_grid(cast.acme, cases=4, variants=2, trials=3, status=_mixed)
    for trial in Trial.objects.filter(run__batch=small).order_by("id")[:3]:
        add_events(trial, 3)
    small_url = _pages(small)[which]
    client.force_login(cast.alice)
    client.get(small_url)  # warm caches (content types, templates)
    small_queries = _queries(client, small_url)

    # A second organization's reader sees only the big batch, as the small one's sees it.
    big = make_batch_with_grid(cast.globex, cases=40, variants=3, trials=10, status=_mixed)
    for trial in Trial.objects.filter(run__batch=big).order_by("id")[:3]:
        add_events(trial, 30)
    client.force_login(cast.charlie)
    big_url = _pages(big)[which]
    client.get(big_url)

    assert _queries(client, big_url) == small_queries


def test_pages_and_api_lists_come_gzipped_to_a_client_that_asks(client):
    cast = make_cast()
    batch = make_batch_with_grid(cast.acme, cases=30, variants=3, trials=2)
    client.force_login(cast.alice)
    for url, shown in (
        (f"/batches/{batch.pk}/", "case-029"),
        (f"/api/trials/?batch={batch.pk}", '"run":'),
    ):
        plain = client.get(url)
        packed = client.get(url, HTTP_ACCEPT_ENCODING="gzip")
        assert "Content-Encoding" not in plain
        assert packed["Content-Encoding"] == "gzip"
        assert "Accept-Encoding" in packed["Vary"]
        assert len(packed.content) < len(plain.content) / 3
        assert shown in gzip.decompress(packed.content).decode()


def test_a_trial_with_ten_thousand_events_shows_its_first_page_and_loads_the_rest(client):
    cast = make_cast()
    batch = make_batch_with_grid(cast.acme, cases=1, variants=1, trials=1)
    trial = Trial.objects.get(run__batch=batch)
    add_events(trial, 10_000, text="step")
    assert Event.objects.filter(trial=trial).count() == 10_000
    client.force_login(cast.alice)

    html = client.get(f"/trials/{trial.pk}/").content.decode()
    shown = html.count('id="event-')
    assert 0 < shown <= PAGE_SIZE
    assert f"after={PAGE_SIZE - 1}" in html  # where the next page starts, fetched on scroll
    later = client.get(
        f"/trials/{trial.pk}/?after={PAGE_SIZE - 1}&upto=9999", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 0 < later.count('id="event-') <= PAGE_SIZE
