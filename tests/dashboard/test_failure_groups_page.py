"""The batch page's failures by cause and the API's (issue 32): three planted causes, the
largest first, each linking to its trials; another organization's batch is a 404."""

from __future__ import annotations

import pytest
from factories import (
    make_batch,
    make_case,
    make_cast,
    make_run,
    make_trial,
    make_variant,
    make_version,
)

from evals_app.models import Check, Trial

pytestmark = pytest.mark.django_db

S = Trial.Status


@pytest.fixture
def planted():
    """A batch of 4 + 3 + 2 failing trials (two checks' messages, one error) and 2 passes."""
    cast = make_cast()
    batch = make_batch(cast.acme, status="finished")
    variant = make_variant(cast.acme, "command")
    run = make_run(batch, make_version(make_case(cast.acme, "health-route")), variant)
    other = make_run(batch, make_version(make_case(cast.acme, "lint")), variant)
    trials: dict[str, list[Trial]] = {"health": [], "lint": [], "errored": []}
    index = 0

    def trial(on, status: str, **fields) -> Trial:
        nonlocal index
        index += 1
        return make_trial(on, index, status, **fields)

    for n in range(4):
        t = trial(run, S.FAILED)
        Check.objects.create(trial=t, index=0, name="tests", kind="command", passed=True)
        Check.objects.create(
            trial=t,
            index=1,
            name="health-route",
            kind="validator",
            passed=False,
            message=f"AssertionError: expected 200, got 50{n} at /tmp/trial-{n}/app.py "
            f"(commit {'abcdef0' * 2}{n})",
        )
        # A later failing check is not the cause: the first one is.
        Check.objects.create(
            trial=t, index=2, name="style", kind="command", passed=False, message="exited 1"
        )
        trials["health"].append(t)
    for n in range(3):
        t = trial(other, S.FAILED)
        Check.objects.create(
            trial=t, index=0, name="ruff", kind="command", passed=False, message=f"exited {n + 1}"
        )
        trials["lint"].append(t)
    for n in range(2):
        trials["errored"].append(
            trial(
                other,
                S.ERRORED,
                error=f'Traceback (most recent call last):\n  File "/srv/x{n}.py", line {n}\n'
                f"OSError: sandbox 0x7f{n}a3 could not start",
            )
        )
    for _ in range(2):
        trial(run, S.PASSED)
    return cast, batch, trials


def test_the_api_lists_the_causes_largest_first_with_their_trials(client, planted) -> None:
    cast, batch, trials = planted
    client.force_login(cast.bob)

    body = client.get(f"/api/analysis/batches/{batch.pk}/failures/").json()

    groups = body["groups"]
    assert [(g["count"], g["status"], g["check"]) for g in groups] == [
        (4, "failed", "health-route"),
        (3, "failed", "ruff"),
        (2, "errored", None),
    ]
    assert groups[0]["cause"] == (
        "AssertionError: expected 200, got 500 at /tmp/trial-0/app.py (commit abcdef0abcdef00) "
        "in check health-route"
    )
    assert groups[1]["cause"] == "exited 1 in check ruff"
    assert groups[2]["cause"] == "OSError: sandbox 0x7f0a3 could not start"
    assert groups[0]["trial_ids"] == [t.pk for t in trials["health"]]
    assert groups[2]["trial_ids"] == [t.pk for t in trials["errored"]]
    assert groups[0]["urls"][0] == f"http://testserver/trials/{trials['health'][0].pk}/"


def test_the_batch_page_loads_the_causes_and_each_links_to_its_trials(client, planted) -> None:
    cast, batch, trials = planted
    client.force_login(cast.alice)

    grid = client.get(f"/batches/{batch.pk}/").content.decode()
    assert f'hx-get="/batches/{batch.pk}/failures/?summary=1"' in grid

    card = client.get(f"/batches/{batch.pk}/failures/?summary=1").content.decode()
    causes = [card.index(text) for text in ("4 failed", "3 failed", "2 errored")]
    assert causes == sorted(causes)
    assert "expected 200, got 500" in card
    for t in trials["health"] + trials["lint"] + trials["errored"]:
        assert f'href="/trials/{t.pk}/"' in card

    page = client.get(f"/batches/{batch.pk}/failures/")
    assert page.status_code == 200
    assert "Failures of" in page.content.decode()


def test_another_organizations_batch_is_not_found(client, planted) -> None:
    cast, batch, _ = planted
    client.force_login(cast.charlie)

    assert client.get(f"/batches/{batch.pk}/failures/").status_code == 404
    assert client.get(f"/api/analysis/batches/{batch.pk}/failures/").status_code == 404


def test_a_batch_without_failures_says_so(client) -> None:
    cast = make_cast()
    batch = make_batch(cast.acme, status="finished")
    client.force_login(cast.alice)

    card = client.get(f"/batches/{batch.pk}/failures/?summary=1").content.decode()

    assert "No trial of this batch failed or errored." in card
