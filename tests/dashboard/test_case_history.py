"""The case history page: versions, what changed, and pass rates per version and variant."""

from __future__ import annotations

import re

import pytest
from factories import (
    EVAL_PATH,
    EVAL_SOURCE,
    make_batch,
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


def test_it_lists_versions_newest_first_with_what_changed_and_pass_rates(client):
    cast = make_cast()
    case = make_case(cast.acme, "health-route")
    v1 = make_version(case)
    changed = make_definition("api", "health-route", prompt="Add a /health route and a test for it")
    v2 = make_version(
        case,
        definition=changed,
        sources={EVAL_PATH: EVAL_SOURCE.replace('"/health" in text', '"/healthz" in text')},
    )
    careful, hasty = make_variant(cast.acme, "careful"), make_variant(cast.acme, "hasty")
    for version, variant, statuses in [
        (v1, careful, [S.PASSED, S.FAILED]),
        (v1, hasty, [S.FAILED, S.FAILED]),
        (v2, careful, [S.PASSED, S.PASSED]),
    ]:
        for _ in range(2):  # pass rates add up across batches
            run = make_run(make_batch(cast.acme), version, variant)
            for index, status in enumerate(statuses):
                make_trial(run, index, status)
    client.force_login(cast.bob)
    html = client.get(f"/cases/{case.pk}/").content.decode()

    assert html.index('id="version-2"') < html.index('id="version-1"')
    version_two = re.search(r'id="version-2".*?</li>\s*<li', html, re.S).group(0)
    assert "prompt changed" in version_two
    assert "/healthz" in version_two  # the captured source diff
    assert "first version" in html
    rows = {
        m.group(1): m.group(0)
        for m in re.finditer(
            r'<tr>\s*<th scope="row" class="case-col"><a href="#version-(\d)".*?</tr>', html, re.S
        )
    }
    assert ">2/4<" in rows["1"] and ">0/4<" in rows["1"]
    assert ">4/4<" in rows["2"] and "cell--empty" in rows["2"]


def test_it_answers_404_for_another_organizations_case(client):
    cast = make_cast()
    case = make_case(cast.acme, "health-route")
    client.force_login(cast.charlie)
    assert client.get(f"/cases/{case.pk}/").status_code == 404
