"""A query value with a NUL byte is a 400 with one sentence, on the pages and the API, instead
of a 500 from the database (PostgreSQL's text fields cannot hold NUL)."""

from __future__ import annotations

import pytest
from factories import make_batch_with_grid, make_cast

pytestmark = pytest.mark.django_db


@pytest.fixture
def cast():
    return make_cast()


def test_an_api_search_with_a_nul_byte_is_a_400_naming_the_parameter(client, cast):
    client.force_login(cast.alice)

    response = client.get("/api/cases/", {"search": "a\x00b"})

    assert response.status_code == 400
    [sentence] = response.json()["search"]
    assert sentence.startswith("search holds a NUL byte")


def test_a_grid_search_with_a_nul_byte_is_a_400_sentence(client, cast):
    batch = make_batch_with_grid(cast.acme, cases=2, variants=1, trials=1)
    client.force_login(cast.alice)

    response = client.get(f"/batches/{batch.pk}/", {"q": "\x00"})

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")
    assert "q holds a NUL byte" in response.content.decode()


def test_ordinary_queries_still_reach_the_view(client, cast):
    client.force_login(cast.alice)

    response = client.get("/api/cases/", {"search": "health"})

    assert response.status_code == 200
