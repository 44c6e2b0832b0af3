"""The compare page: B against A, regressions first with their intervals, the headline, the
paired test named, and the comparability warnings on top."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from .compare_seeds import seed_pair

pytestmark = pytest.mark.django_db


def rows(html: str) -> list[str]:
    return re.findall(r'<tr class="compare-row.*?</tr>', html, re.S)


def test_it_puts_the_planted_regression_on_top_with_its_interval(client, cast, pair):
    client.force_login(cast.bob)
    response = client.get("/compare/", {"a": pair.a.pk, "b": pair.b.pk})
    assert response.status_code == 200
    html = response.content.decode()

    top = rows(html)[0]
    assert "compare-row--regression" in top
    assert "planted" in top and ">steady<" in top
    assert "3/3" in top and "0/3" in top
    assert "−100.0 pp" in top
    # Newcombe's interval of 0/3 - 3/3 stays well below zero: a significant drop.
    assert re.search(r"\[−100, −\d+\] pp", top)
    assert "significant" in top
    second = rows(html)[1]
    assert "wobbly" in second and "−33.3 pp" in second and "significant" not in second
    assert 'id="headline">B passes 1 fewer case than A; 2 regressions, 1 significant' in html
    assert "exact McNemar" in html
    assert "Wilson" in html


def test_it_warns_by_name_when_the_sides_are_not_comparable(client, cast, pair):
    client.force_login(cast.alice)
    html = client.get("/compare/", {"a": pair.a.pk, "b": pair.b.pk}).content.decode()
    warnings = html.index('id="compare-warnings"')
    assert warnings < html.index('id="cell-comparison"')
    assert 'data-kind="trial_count"' in html
    assert "api/planted × quick ran 3 in A, 2 in B" in html


def test_it_compares_a_batch_with_the_baseline_of_its_suite(client, cast, pair):
    client.force_login(cast.alice)
    missing = client.get("/compare/", {"a": "baseline", "b": pair.b.pk}).content.decode()
    assert "No batch is marked as the baseline of api" in missing
    pair.a.mark_baseline()
    html = client.get("/compare/", {"a": "baseline", "b": pair.b.pk}).content.decode()
    assert f"with the api baseline, batch #{pair.a.pk}" in html
    assert "2 regressions, 1 significant" in html


def test_it_shows_cost_per_passed_trial_on_each_side(client, cast, pair):
    client.force_login(cast.alice)
    html = client.get("/compare/", {"a": pair.a.pk, "b": pair.b.pk}).content.decode()
    # A: 24 trials at $0.01, 24 passes; B: 23 trials, 19 passes.
    cost = re.search(r'id="cost-per-pass">(.*?)</td>', html, re.S).group(1)
    assert cost.strip() == "$0.0100 → $0.0121"


def test_another_organizations_batch_is_not_found(client, cast, pair):
    client.force_login(cast.charlie)
    assert client.get("/compare/", {"a": pair.a.pk, "b": pair.b.pk}).status_code == 404
    assert client.get("/compare/", {"a": "baseline", "b": pair.b.pk}).status_code == 404
    assert client.get("/compare/").status_code == 200


def test_it_compares_big_batches_in_as_few_queries_as_small_ones(
    client, cast, django_assert_max_num_queries
):
    small = seed_pair(cast, trials_b=3)
    client.force_login(cast.alice)
    client.get("/compare/", {"a": small.a.pk, "b": small.b.pk})
    with CaptureQueriesContext(connection) as few:
        client.get("/compare/", {"a": small.a.pk, "b": small.b.pk})
    from factories import make_batch_with_grid

    big_a = make_batch_with_grid(cast.acme, cases=40, variants=3, trials=3)
    big_b = make_batch_with_grid(cast.acme, cases=40, variants=3, trials=3)
    with django_assert_max_num_queries(len(few)):
        assert client.get("/compare/", {"a": big_a.pk, "b": big_b.pk}).status_code == 200


def test_a_long_comparison_shows_its_first_cells_regressions_first_and_all_on_request(client, cast):
    from factories import make_batch_with_grid

    from dashboard.views.compare import CELLS_SHOWN
    from evals_app.models import Trial, Variant

    # 40 cases x 8 variants: 320 cells, more than are shown at first. The one regression is in
    # the last case of the last variant, so it would be cut off in the page's own order.
    a = make_batch_with_grid(cast.acme, cases=40, variants=8, trials=1)
    b = make_batch_with_grid(
        cast.acme,
        cases=40,
        variants=8,
        trials=1,
        status=lambda c, v, t: Trial.Status.FAILED if (c, v) == (39, 7) else Trial.Status.PASSED,
    )
    # The factory names each batch's variants after it: B's take A's names, so cells match.
    for variant in Variant.objects.filter(runs__batch=b).distinct():
        variant.name = variant.name.replace(f"variant-{b.pk}-", f"variant-{a.pk}-")
        variant.save(update_fields=["name"])
    client.force_login(cast.alice)
    html = client.get("/compare/", {"a": a.pk, "b": b.pk}).content.decode()

    shown = rows(html)
    assert len(shown) == CELLS_SHOWN == 300
    assert "compare-row--regression" in shown[0] and "case-039" in shown[0]
    left_out = re.search(r'<tr id="cells-left-out">.*?</tr>', html, re.S).group(0)
    assert "The first 300 of 320 cells, regressions first; 20 more." in left_out
    link = re.search(r'href="\?([^"]+)">Show all 320</a>', left_out).group(1)
    everything = client.get(f"/compare/?{link.replace('&amp;', '&')}").content.decode()
    assert len(rows(everything)) == 320
    assert 'id="cells-left-out"' not in everything


def test_text_people_and_agents_wrote_stays_text(client, cast, pair):
    planted = "<img src=x onerror=alert(1)>"
    type(pair.a).objects.filter(pk=pair.a.pk).update(label=planted)
    client.force_login(cast.alice)
    pages = [
        client.get("/batches/").content.decode(),
        client.get("/compare/", {"a": pair.a.pk, "b": pair.b.pk}).content.decode(),
        # The flaky history names each batch by its label.
        client.get(f"/batches/{pair.b.pk}/").content.decode(),
    ]
    for html in pages:
        assert planted not in html
        assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_it_shows_pass_at_k_and_pass_hat_k_per_variant_and_cell(client, cast, pair):
    client.force_login(cast.alice)
    html = client.get("/compare/", {"a": pair.a.pk, "b": pair.b.pk}).content.decode()
    top = rows(html)[0]  # planted × steady: 3/3, then 0/3
    assert 'pass@3 1.00 · pass^3 1.00</span> → <span class="cell-passk">pass@3 0.00' in top
    steady = re.search(r'<tr class="variant-row".*?steady.*?</tr>', html, re.S).group(0)
    # In B steady passes three cells 3/3 and planted 0/3: (1 + 1 + 1 + 0) / 4 at k = 3.
    assert (
        'pass@3 1.00 · pass^3 1.00</span> → <span class="cell-passk">pass@3 0.75 · pass^3 0.75'
        in steady
    )
