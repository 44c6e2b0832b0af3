"""The metrics page of a batch: each weighted assertion's metric per variant (pass rate, mean
score, weight), under each variant's mean weighted score and threshold count."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import (
    assertion_spec,
    make_assertion_check,
    make_batch,
    make_batch_with_grid,
    make_case,
    make_cast,
    make_definition,
    make_run,
    make_trial,
    make_variant,
    make_version,
)

from evals_app.models import Trial

pytestmark = pytest.mark.django_db

S = Trial.Status

BOOKING_CHECKS = [
    assertion_spec(
        "llm-rubric", "Ends with a booked demo", name="disposition", weight=2, metric="disposition"
    ),
    assertion_spec("llm-rubric", "Warm and professional", name="tone", weight=1, metric="tone"),
    assertion_spec("latency", 60000, name="latency", weight=0, metric="latency"),
    assertion_spec("icontains", "demo", name="says demo", weight=0.5),
]


@pytest.fixture
def cast():
    return make_cast()


def booking_batch(cast):
    """Two variants, two trials each, graded by four assertions. ``careful`` books both demos;
    ``hasty`` books one, and its second trial is curt."""
    batch = make_batch(cast.acme, status="finished", label="booking agents")
    case = make_case(cast.acme, "book-a-demo")
    version = make_version(
        case, definition=make_definition("api", "book-a-demo", checks=BOOKING_CHECKS)
    )
    careful = make_run(batch, version, make_variant(cast.acme, "careful"))
    hasty = make_run(batch, version, make_variant(cast.acme, "hasty"))
    outcomes = {
        # (run, trial index): (disposition, tone score, latency passed, says demo), score
        (careful, 0): ((True, 1.0, True, True), 1.0),
        (careful, 1): ((True, 0.5, False, True), 0.8),
        (hasty, 0): ((True, 1.0, True, True), 1.0),
        (hasty, 1): ((False, 0.0, True, False), 0.0),
    }
    for (run, index), ((disposition, tone, fast, demo), score) in outcomes.items():
        trial = make_trial(
            run, index, S.PASSED if score >= 0.6 else S.FAILED, score=score, threshold=0.6
        )
        make_assertion_check(
            trial, 0, name="disposition", metric="disposition", weight=2, passed=disposition
        )
        make_assertion_check(
            trial, 1, name="tone", metric="tone", weight=1, passed=tone >= 0.5, score=tone
        )
        make_assertion_check(trial, 2, name="latency", metric="latency", weight=0, passed=fast)
        make_assertion_check(trial, 3, name="says demo", weight=0.5, passed=demo)
    return batch


def metric_row(html: str, name: str) -> str:
    match = re.search(
        rf'<tr class="metric-row[^"]*">\s*<th scope="row" class="case-col">\s*'
        rf'<span class="case-name">{re.escape(name)}</span>.*?</tr>',
        html,
        re.S,
    )
    assert match, f"no row for {name}"
    return match.group(0)


def cells(row: str) -> list[str]:
    """The variant cells of a row, tags stripped and spaces squeezed."""
    found = re.findall(r'<td class="cell[^"]*"[^>]*>(.*?)</td>', row, re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", cell).split()) for cell in found]


def test_it_shows_each_metrics_pass_rate_mean_score_and_weight_per_variant(client, cast):
    batch = booking_batch(cast)
    client.force_login(cast.alice)
    response = client.get(f"/batches/{batch.pk}/metrics/")
    assert response.status_code == 200
    html = response.content.decode()

    assert re.findall(r'<span class="variant-name">(.*?)</span>', html) == ["careful", "hasty"]
    disposition = metric_row(html, "disposition")
    assert ">2<" in disposition  # its weight
    assert cells(disposition) == ["100% 2/2 · mean 1.00", "50% 1/2 · mean 0.50"]
    assert cells(metric_row(html, "tone")) == ["100% 2/2 · mean 0.75", "50% 1/2 · mean 0.50"]
    latency = metric_row(html, "latency")
    assert "info only" in latency and "metric-row--info" in latency
    assert cells(latency)[0] == "50% 1/2 · mean 0.50"
    # An assertion without a metric is its own row, under its name.
    says_demo = metric_row(html, "says demo")
    assert "assertion without a metric" in says_demo and ">0.5<" in says_demo
    # Heaviest first, information only last.
    order = [
        html.index(f'<span class="case-name">{n}</span>')
        for n in ("disposition", "tone", "says demo", "latency")
    ]
    assert order == sorted(order)

    score = re.search(r'<tr id="weighted-score">.*?</tr>', html, re.S).group(0)
    assert cells(score) == ["0.90 2 trials", "0.50 2 trials"]
    met = re.search(r'<tr id="met-threshold">.*?</tr>', html, re.S).group(0)
    assert cells(met) == ["2/2 trials", "1/2 trials"]


def test_it_keeps_a_metric_apart_from_an_assertion_of_the_same_name(client, cast):
    batch = make_batch(cast.acme)
    run = make_run(batch, make_version(make_case(cast.acme, "c")), make_variant(cast.acme, "v"))
    trial = make_trial(run)
    make_assertion_check(trial, 0, name="tone", metric="tone", passed=True)
    make_assertion_check(trial, 1, name="tone", metric="", passed=False)
    client.force_login(cast.alice)
    html = client.get(f"/batches/{batch.pk}/metrics/").content.decode()

    rows = re.findall(r'<tr class="metric-row.*?</tr>', html, re.S)
    assert len(rows) == 2
    assert sorted(cells(row)[0] for row in rows) == ["0% 0/1 · mean 0.00", "100% 1/1 · mean 1.00"]


def test_it_links_the_metrics_page_from_the_grid_and_back(client, cast):
    batch = booking_batch(cast)
    client.force_login(cast.alice)
    grid = client.get(f"/batches/{batch.pk}/").content.decode()
    assert f'href="/batches/{batch.pk}/metrics/"' in grid
    metrics = client.get(f"/batches/{batch.pk}/metrics/").content.decode()
    assert f'href="/batches/{batch.pk}/"' in metrics


def test_it_says_how_to_get_metrics_when_a_batch_has_no_assertions(client, cast):
    batch = make_batch_with_grid(cast.acme, cases=1, variants=1, status=lambda *_: S.PASSED)
    batch.status = "finished"
    batch.save()
    client.force_login(cast.alice)
    html = client.get(f"/batches/{batch.pk}/metrics/").content.decode()
    assert f"No weighted assertion was graded in batch #{batch.pk}." in html
    assert "metric-row" not in html


def test_it_answers_404_for_another_organizations_metrics(client, cast):
    batch = booking_batch(cast)
    client.force_login(cast.charlie)
    assert client.get(f"/batches/{batch.pk}/metrics/").status_code == 404
    assert client.get("/batches/999999/metrics/").status_code == 404
    client.force_login(cast.bob)
    assert client.get(f"/batches/{batch.pk}/metrics/").status_code == 200
    client.logout()
    assert client.get(f"/batches/{batch.pk}/metrics/")["Location"].startswith("/login/")


def test_it_counts_metrics_in_a_fixed_number_of_queries(
    client, cast, django_assert_max_num_queries
):
    small = booking_batch(cast)
    big = make_batch(cast.acme, status="finished")
    variants = [make_variant(cast.acme, f"arm-{j}") for j in range(6)]
    for c in range(12):
        version = make_version(make_case(cast.acme, f"case-{c}"))
        for variant in variants:
            run = make_run(big, version, variant)
            for t in range(3):
                trial = make_trial(run, t, score=(c + t) % 4 / 3, threshold=0.5)
                for m in range(8):
                    make_assertion_check(
                        trial,
                        m,
                        name=f"check {m}",
                        metric=f"metric-{m % 5}",
                        weight=m % 3,
                        passed=(c + t + m) % 3 != 0,
                    )
    client.force_login(cast.alice)
    client.get(f"/batches/{small.pk}/metrics/")  # warm caches (content types, templates)

    with CaptureQueriesContext(connection) as small_queries:
        assert client.get(f"/batches/{small.pk}/metrics/").status_code == 200
    with django_assert_max_num_queries(len(small_queries)):
        response = client.get(f"/batches/{big.pk}/metrics/")
    html = response.content.decode()
    assert html.count('class="metric-row') == 5
    assert html.count('class="variant-name"') == 6


def test_a_derived_metric_is_its_expression_over_the_variants_summed_scores(client, cast):
    """promptfoo's derivedMetrics: precision = tp / (tp + fp) over the variant's tests, a ratio
    of sums (3 / 4 here), not the mean of each trial's own ratio (which would be 2/3)."""
    batch = make_batch(cast.acme, status="finished")
    precision = "tp / (tp + fp)"
    checks = [
        assertion_spec("python", "x", name="tp", metric="tp"),
        assertion_spec("python", "x", name="fp", metric="fp"),
        assertion_spec("derived-metric", precision, name="precision", weight=0, metric="precision"),
    ]
    version = make_version(
        make_case(cast.acme, "classify"),
        definition=make_definition("api", "classify", checks=checks),
    )
    run = make_run(batch, version, make_variant(cast.acme, "v"))
    # (tp, fp) per trial: 1/1 = 1.0, 2/3 ≈ 0.67, 0/0 has no ratio of its own.
    for index, (tp, fp) in enumerate([(1, 0), (2, 1), (0, 0)]):
        trial = make_trial(run, index)
        make_assertion_check(trial, 0, name="tp", metric="tp", passed=True, score=tp)
        make_assertion_check(trial, 1, name="fp", metric="fp", passed=True, score=fp)
        make_assertion_check(
            trial, 2, name="precision", metric="precision", weight=0, passed=True, score=0
        )
    client.force_login(cast.alice)
    html = client.get(f"/batches/{batch.pk}/metrics/").content.decode()

    row = metric_row(html, "precision")
    assert cells(row) == ["0.750 over 3 trials"]
    assert "tp / (tp + fp)" in row
