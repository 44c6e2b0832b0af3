"""The batches page: every batch of the organization, filtered and paginated, and the baseline
mark."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import make_batch_with_grid

from evals_app.models import Batch, Trial

pytestmark = pytest.mark.django_db

S = Trial.Status


def listed(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<tr id="batch-row-(\d+)"', html)]


def test_it_lists_every_batch_with_its_counts_cost_and_parent(client, cast, pair):
    rerun = make_batch_with_grid(
        cast.acme,
        cases=1,
        variants=1,
        trials=2,
        parent=pair.b,
        label="rerun of failed trials",
        status=lambda c, v, t: S.ERRORED if t else S.TIMED_OUT,
    )
    client.force_login(cast.bob)
    html = client.get("/batches/").content.decode()

    assert listed(html) == [rerun.pk, pair.b.pk, pair.a.pk]
    row_b = re.search(rf'<tr id="batch-row-{pair.b.pk}".*?</tr>', html, re.S).group(0)
    # B: 8 cells, 23 trials (planted x quick ran 2); 3 + 1 failed.
    assert "19/23" in row_b and "83%" in row_b
    assert "4 failed" in row_b and "19 passed" in row_b
    assert "$0.2300" in row_b
    assert ">alice<" in row_b and ">api<" in row_b
    row_rerun = re.search(rf'<tr id="batch-row-{rerun.pk}".*?</tr>', html, re.S).group(0)
    assert f'href="/batches/{pair.b.pk}/">#{pair.b.pk}<' in row_rerun
    assert "1 timed out" in row_rerun and "1 errored" in row_rerun
    assert f"/compare/?a={pair.b.pk}&amp;b={rerun.pk}" in row_rerun
    assert f'href="/batches/{rerun.pk}/"' in row_rerun


def test_it_filters_by_label_status_who_suite_and_date(client, cast, pair):
    other = make_batch_with_grid(cast.acme, cases=1, variants=1, suites=("cli",), label="nightly")
    client.force_login(cast.alice)

    def shown(**params) -> list[int]:
        response = client.get("/batches/", params)
        assert response.status_code == 200
        return listed(response.content.decode())

    assert shown(label="b") == [pair.b.pk]
    assert shown(label="NIGHT") == [other.pk]
    assert shown(who="alice") == [pair.b.pk, pair.a.pk]
    assert shown(suite="cli") == [other.pk]
    assert shown(status="queued") == [other.pk]
    today = pair.a.created_at.date().isoformat()
    assert shown(since=today, until=today) == [other.pk, pair.b.pk, pair.a.pk]
    assert shown(until="2000-01-01") == []
    bad = client.get("/batches/", {"since": "yesterday"})
    assert bad.status_code == 400
    assert bad.content.decode() == "since must be a date like 2026-01-31, not 'yesterday'."


def test_it_paginates_and_keeps_the_filters(client, cast):
    for n in range(27):
        Batch.objects.create(organization=cast.acme, label=f"run {n}")
    client.force_login(cast.alice)
    first = client.get("/batches/", {"label": "run"}).content.decode()
    assert len(listed(first)) == 25
    assert "page 1 of 2" in first
    assert 'href="?label=run&amp;page=2"' in first
    second = client.get("/batches/", {"label": "run", "page": 2}).content.decode()
    assert len(listed(second)) == 2


def test_it_marks_and_unmarks_a_baseline(client, cast, pair):
    client.force_login(cast.bob)
    response = client.post(f"/batches/{pair.a.pk}/baseline/", {"next": "/batches/"})
    assert response.status_code == 302 and response["Location"] == "/batches/"
    pair.a.refresh_from_db()
    assert pair.a.is_baseline
    html = client.get("/batches/").content.decode()
    assert "is now the baseline of api" in html
    assert f'id="unmark-baseline-{pair.a.pk}"' in html
    # Marking B moves the baseline of the suite to it.
    client.post(f"/batches/{pair.b.pk}/baseline/")
    pair.a.refresh_from_db()
    assert not pair.a.is_baseline
    client.post(f"/batches/{pair.b.pk}/baseline/", {"unmark": "1", "next": "https://evil.example/"})
    pair.b.refresh_from_db()
    assert not pair.b.is_baseline
    assert client.get(f"/batches/{pair.b.pk}/baseline/").status_code == 405


def test_another_organization_sees_none_of_it(client, cast, pair):
    client.force_login(cast.charlie)
    assert listed(client.get("/batches/").content.decode()) == []
    assert client.post(f"/batches/{pair.a.pk}/baseline/").status_code == 404
    pair.a.refresh_from_db()
    assert not pair.a.is_baseline


def test_it_lists_many_batches_in_as_few_queries_as_few(
    client, cast, django_assert_max_num_queries
):
    make_batch_with_grid(cast.acme, cases=2, variants=1, trials=1)
    client.force_login(cast.alice)
    client.get("/batches/")
    with CaptureQueriesContext(connection) as few:
        client.get("/batches/")
    for _ in range(30):
        make_batch_with_grid(cast.acme, cases=3, variants=2, trials=2, parent=Batch.objects.first())
    with django_assert_max_num_queries(len(few)):
        html = client.get("/batches/").content.decode()
    assert len(listed(html)) == 25
