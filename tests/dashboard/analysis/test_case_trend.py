"""The case page's trend chart: one series per variant across the batches that ran the case,
and a mark where its version changed."""

from __future__ import annotations

import re

import pytest
from factories import make_batch, make_case, make_run, make_trial, make_variant, make_version

from evals_app.models import Trial

pytestmark = pytest.mark.django_db

S = Trial.Status


def test_it_charts_each_variant_across_batches_with_the_version_boundary(client, cast):
    case = make_case(cast.acme, "greet")
    v1 = make_version(case)
    v2 = make_version(case, definition={"prompt": "changed", "suite": "api", "case": "greet"})
    steady, sloppy = make_variant(cast.acme, "steady"), make_variant(cast.acme, "<b>sloppy</b>")
    batches = []
    for version, outcomes in (
        (v1, (S.PASSED, S.PASSED)),
        (v1, (S.PASSED, S.FAILED)),
        (v2, (S.FAILED, S.FAILED)),
    ):
        batch = make_batch(cast.acme, label=f"v{version.number}")
        batches.append(batch)
        for variant in (steady, sloppy):
            run = make_run(batch, version, variant)
            for index, status in enumerate(outcomes):
                make_trial(run, index, status)
    client.force_login(cast.bob)
    html = client.get(f"/cases/{case.pk}/").content.decode()

    svg = re.search(r'<svg class="trend-chart".*?</svg>', html, re.S).group(0)
    assert re.findall(r'class="trend-series" data-variant="([^"]*)"', svg) == [
        "&lt;b&gt;sloppy&lt;/b&gt;",
        "steady",
    ]
    assert svg.count('class="series"') == 2
    assert svg.count("<circle") == 6
    # The drop: 100%, 50%, then 0% once v2 ran.
    assert f"steady: 1/2 passed in batch #{batches[1].pk} (v1), v1" in svg
    assert f"steady: 0/2 passed in batch #{batches[2].pk} (v2), v2" in svg
    boundaries = re.findall(r'class="version-boundary" data-version="(\d+)"', svg)
    assert boundaries == ["2"]
    assert "<b>sloppy</b>" not in html


def test_a_case_that_never_ran_has_no_chart(client, cast):
    case = make_case(cast.acme, "fresh")
    make_version(case)
    client.force_login(cast.alice)
    html = client.get(f"/cases/{case.pk}/").content.decode()
    assert "trend-chart" not in html
