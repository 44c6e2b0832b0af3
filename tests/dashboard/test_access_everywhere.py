"""Every page needs a signed-in member: a visitor is sent to sign in, charlie (another
organization) gets 404 for every page and button of acme's, bob sees them all."""

from __future__ import annotations

import pytest
from factories import make_batch_with_grid, make_cast, make_trial_with_events

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme_urls(tmp_path) -> tuple[object, list[str], list[str]]:
    cast = make_cast()
    batch = make_batch_with_grid(cast.acme, cases=1, variants=1, trials=1)
    run = batch.runs.get()
    (tmp_path / "events.jsonl").write_text("{}\n")
    trial = make_trial_with_events(run, index=1, artifacts_dir=tmp_path)
    case = run.case_version.case
    first = run.trials.get(index=0)
    pages = [
        f"/batches/{batch.pk}/",
        f"/batches/{batch.pk}/metrics/",
        f"/batches/{batch.pk}/variants/",
        f"/batches/{batch.pk}/variants/?summary=1",
        f"/batches/{batch.pk}/labelling/",
        f"/judges/?batch={batch.pk}",
        f"/judges/?batch={batch.pk}&summary=1",
        f"/?batch={batch.pk}",
        f"/runs/{run.pk}/",
        f"/trials/{trial.pk}/",
        f"/trials/{trial.pk}/?after=0",
        f"/trials/{trial.pk}/artifacts/events.jsonl",
        f"/trials/{trial.pk}/trajectory.json",
        f"/trials/{trial.pk}/compare/",
        f"/trials/{trial.pk}/compare/{first.pk}/",
        f"/trials/{first.pk}/compare/{trial.pk}/?turn=0&start=0",
        f"/cases/{case.pk}/",
    ]
    buttons = [
        f"/batches/{batch.pk}/rerun/",
        f"/batches/{batch.pk}/rerun-failed/",
        f"/batches/{batch.pk}/cases/{case.pk}/rerun/",
        f"/runs/{run.pk}/rerun/",
        f"/trials/{trial.pk}/label/",
    ]
    return cast, pages, buttons


def test_it_sends_a_visitor_to_sign_in_from_every_page_and_button(client, acme_urls):
    _, pages, buttons = acme_urls
    for url in ["/", *pages]:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/?next="), url
    for url in buttons:
        response = client.post(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/?next="), url


def test_it_answers_404_to_charlie_everywhere_and_200_to_bob(client, acme_urls):
    cast, pages, buttons = acme_urls
    client.force_login(cast.charlie)
    for url in pages:
        assert client.get(url).status_code == 404, url
    for url in buttons:
        assert client.post(url).status_code == 404, url
    client.force_login(cast.bob)
    for url in pages:
        assert client.get(url).status_code == 200, url
