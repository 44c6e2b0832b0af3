"""Variant against variant on the dashboard and in the API: the variants page of a batch, the
summary the grid loads under its table, and /api/analysis/batches/<id>/variants/. The batch is
the worked example of docs/compare.md (careful against hasty over four cases)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from compare.seeding import Seed
from compare.test_variants_in_a_batch import CAREFUL, HASTY
from evals_app.models import Organization

pytestmark = pytest.mark.django_db


@pytest.fixture
def seed() -> Seed:
    return Seed()


@pytest.fixture
def alice(seed) -> User:
    user = User.objects.create_user(username="alice")
    seed.org.members.add(user)
    return user


@pytest.fixture
def charlie() -> User:
    user = User.objects.create_user(username="charlie")
    Organization.objects.create(slug="globex", name="Globex").members.add(user)
    return user


@pytest.fixture
def batch(seed):
    cells = {(case, "careful"): trials for case, trials in CAREFUL.items()}
    cells |= {(case, "hasty"): trials for case, trials in HASTY.items()}
    return seed.batch(cells, label="two agents")


def test_the_page_shows_intervals_the_paired_difference_and_the_power(client, alice, batch):
    client.force_login(alice)
    response = client.get(f"/batches/{batch.pk}/variants/", {"a": "careful", "b": "hasty"})
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="variants-headline">hasty beats careful by 33.3 points' in html
    careful = re.search(r'<tr class="variant-estimate" data-variant="careful">.*?</tr>', html, re.S)
    assert "50%" in careful.group(0) and "[8%, 92%]" in careful.group(0)
    assert "pass@3 0.75" in careful.group(0) and "pass^3 0.25" in careful.group(0)
    pair = re.search(r'<tr class="variant-pair".*?</tr>', html, re.S).group(0)
    assert "+33.3 pp" in pair and "[+7, +60] pp" in pair and ">holds<" in pair
    assert "p = 1.000" in pair
    assert "40.4 pp" in pair
    assert "10 points needs 50 trials per case, or 66 cases at 3 trials" in pair
    cases = re.findall(r'<tr class="pair-case.*?<span class="case-name">(.*?)</span>', html, re.S)
    assert cases == ["parse", "add", "divide", "sort"]


def test_the_chosen_difference_changes_the_plan(client, alice, batch):
    client.force_login(alice)
    html = client.get(f"/batches/{batch.pk}/variants/", {"difference": "45"}).content.decode()
    assert "4 cases × 3 trials already find 45 points" in html


def test_the_grid_links_the_variants_and_loads_their_summary(client, alice, batch):
    client.force_login(alice)
    grid = client.get(f"/batches/{batch.pk}/").content.decode()
    # In the grid's trial mode: the batch alone unless the grid reads its reruns.
    assert f'href="/batches/{batch.pk}/variants/?trials=batch"' in grid
    assert f'hx-get="/batches/{batch.pk}/variants/?summary=1&amp;trials=batch"' in grid
    summary = client.get(f"/batches/{batch.pk}/variants/?summary=1").content.decode()
    assert summary.lstrip().startswith(
        '<section class="card variant-summary" id="variant-against-variant"'
    )
    assert "hasty beats careful" in summary and "40.4 pp" in summary
    assert "pair-cases" not in summary


def test_a_batch_with_one_variant_has_no_variant_summary_on_its_grid(client, alice, seed):
    alone = seed.batch({("add", "careful"): ["passed"]})
    client.force_login(alice)
    assert "variant-against-variant" not in client.get(f"/batches/{alone.pk}/").content.decode()
    page = client.get(f"/batches/{alone.pk}/variants/").content.decode()
    assert "Only careful ran: there is no other variant to compare with." in page
    assert 'id="variant-pairs"' not in page


def test_another_organization_gets_a_404(client, charlie, batch):
    client.force_login(charlie)
    assert client.get(f"/batches/{batch.pk}/variants/").status_code == 404
    api = APIClient()
    api.force_login(charlie)
    assert api.get(f"/api/analysis/batches/{batch.pk}/variants/").status_code == 404


def test_the_api_returns_the_comparison(alice, batch):
    api = APIClient()
    api.force_login(alice)
    body = api.get(
        f"/api/analysis/batches/{batch.pk}/variants/",
        {"variants": ["careful", "hasty"], "difference": "0.45"},
    ).json()
    assert body["headline"].startswith("hasty beats careful by 33.3 points")
    (pair,) = body["pairs"]
    assert pair["holds"] is True
    assert pair["power"]["advice"] == "4 cases × 3 trials already find 45 points"
    assert body["variants"][0]["pass_hat_k"]["3"] == 0.25
    schema = api.get("/api/schema/?format=json").json()
    assert "/api/analysis/batches/{id}/variants/" in schema["paths"]


def test_the_api_names_a_bad_variant_or_difference(alice, batch):
    api = APIClient()
    api.force_login(alice)
    url = f"/api/analysis/batches/{batch.pk}/variants/"
    unknown = api.get(url, {"variants": ["careful", "nimble"]})
    assert unknown.status_code == 400
    assert "ran no variant 'nimble'" in unknown.json()["variants"]
    assert api.get(url, {"variants": "careful"}).status_code == 400
    assert api.get(url, {"difference": "2"}).status_code == 400


def test_the_page_reads_reruns_as_the_grid_does(client, alice, seed, batch):
    # A rerun of careful's failing divide trials, passing now: with its reruns (latest),
    # careful's divide is 3/3 and the pair no longer holds; the batch alone is unchanged.
    seed.batch({("divide", "careful"): ["passed", "passed", "passed"]}, parent=batch)
    client.force_login(alice)
    alone = client.get(f"/batches/{batch.pk}/variants/", {"trials": "batch"}).content.decode()
    assert "hasty beats careful by 33.3 points" in alone
    merged = client.get(f"/batches/{batch.pk}/variants/").content.decode()
    assert "hasty leads careful by 8.3 points" in merged
    assert "not a reliable difference" in merged
