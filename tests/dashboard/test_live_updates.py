"""The batch websocket: members receive re-rendered fragments, everyone else is refused.

Each test drives the consumer with WebsocketCommunicator inside ``async_to_sync``, so the
consumer's database work runs on this thread and sees the test's (uncommitted) rows; the
runner's publisher is called exactly as a worker calls it.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from factories import add_events, make_batch_with_grid, make_cast, make_checks

from dashboard.routing import websocket_urlpatterns
from evals_app.models import Trial, Turn
from runner.jobs import publishing

pytestmark = pytest.mark.django_db

S = Trial.Status
application = URLRouter(websocket_urlpatterns)


def connect(path: str, user) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(application, path)
    communicator.scope["user"] = user
    return communicator


def run_async(coroutine_function):
    return async_to_sync(coroutine_function)()


@pytest.fixture(autouse=True)
def keep_the_test_transactions_connection(monkeypatch):
    """database_sync_to_async closes "old" connections around each call, and a connection
    inside the test's transaction looks old; keep it, as a served request would."""
    monkeypatch.setattr("channels.db.close_old_connections", lambda: None)


@pytest.fixture
def cast():
    return make_cast()


@pytest.fixture
def batch(cast):
    return make_batch_with_grid(
        cast.acme, cases=2, variants=2, trials=2, status=lambda c, v, t: S.QUEUED
    )


def finish(trial: Trial, status: str) -> None:
    trial.status = status
    trial.started_at = timezone.now() - timedelta(seconds=5)
    trial.finished_at = timezone.now()
    trial.duration_ms = 5000
    trial.save()


def receive_cell_after_a_trial_finishes(user, batch) -> tuple[str, int]:
    """Connect to the grid of ``batch``, finish one trial as a worker would, and return what
    the socket received and the run of that trial."""
    run = batch.runs.order_by("id").first()
    trial = run.trials.get(index=0)

    async def scenario():
        ws = connect(f"/ws/batches/{batch.pk}/?watch=grid", user)
        connected, _ = await ws.connect()
        assert connected
        await ws.receive_from(timeout=10)  # the status on connect
        await sync_to_async(finish)(trial, S.PASSED)
        await sync_to_async(publishing.trial_changed)(
            trial_id=trial.pk, run_id=run.pk, batch_id=batch.pk, status=S.PASSED
        )
        html = await ws.receive_from(timeout=10)
        await ws.disconnect()
        return html

    return run_async(scenario), run.pk


def test_it_sends_a_member_the_re_rendered_cell_when_a_trial_changes(cast, batch):
    html, run_id = receive_cell_after_a_trial_finishes(cast.bob, batch)
    run = batch.runs.get(pk=run_id)
    cell = re.search(
        rf'<td id="cell-{run.pk}"[^>]*hx-swap-oob="outerHTML"[^>]*>.*?</td>', html, re.S
    )
    assert cell, html
    assert ">1/2<" in cell.group(0)
    assert f'id="row-total-{run.case_version_id}"' in html
    assert f'id="col-total-{run.variant_id}"' in html
    assert 'id="grid-total"' in html
    assert "1/8 trials finished" in html


@pytest.mark.redis
def test_it_delivers_the_same_update_through_redis(cast, batch, redis_url, settings):
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [redis_url]},
        }
    }
    html, run_id = receive_cell_after_a_trial_finishes(cast.alice, batch)
    assert re.search(
        rf'<td id="cell-{run_id}"[^>]*hx-swap-oob="outerHTML"[^>]*>.*?>1/2<', html, re.S
    )


def test_it_refuses_charlie_and_anonymous_visitors(cast, batch):
    async def scenario():
        results = []
        for user in (cast.charlie, AnonymousUser()):
            ws = connect(f"/ws/batches/{batch.pk}/?watch=grid", user)
            connected, _ = await ws.connect()
            results.append(connected)
            await ws.disconnect()
        return results

    assert run_async(scenario) == [False, False]


def test_it_refuses_a_run_or_trial_that_is_not_in_the_batch(cast, batch):
    other = make_batch_with_grid(cast.acme, cases=1, variants=1)
    foreign_trial = Trial.objects.filter(run__batch=other).first()

    async def scenario():
        results = []
        for query in (
            f"watch=trial&trial={foreign_trial.pk}",
            f"watch=run&run={foreign_trial.run_id}",
            "watch=trial&trial=nope",
            "watch=everything",
        ):
            ws = connect(f"/ws/batches/{batch.pk}/?{query}", cast.alice)
            connected, _ = await ws.connect()
            results.append(connected)
            await ws.disconnect()
        return results

    assert run_async(scenario) == [False, False, False, False]


def test_it_updates_the_run_pages_trial_row(cast, batch):
    run = batch.runs.order_by("id").first()
    trial = run.trials.get(index=1)

    async def scenario():
        ws = connect(
            f"/ws/batches/{batch.pk}/?watch=run&run={run.pk}&since={int(timezone.now().timestamp() * 1000)}",
            cast.alice,
        )
        assert (await ws.connect())[0]
        await ws.receive_from(timeout=10)  # the run's status line on connect
        await sync_to_async(finish)(trial, S.FAILED)
        await sync_to_async(make_checks)(trial, validator_passed=False)
        await sync_to_async(publishing.trial_changed)(
            trial_id=trial.pk, run_id=run.pk, batch_id=batch.pk, status=S.FAILED
        )
        html = await ws.receive_from(timeout=10)
        await ws.disconnect()
        return html

    html = run_async(scenario)
    row = re.search(rf'<tr id="trial-{trial.pk}"[^>]*hx-swap-oob="outerHTML".*?</tr>', html, re.S)
    assert row, html
    assert "status--failed" in row.group(0) and "has_health_route" in row.group(0)
    assert "0/2 passed" in html


def test_it_appends_new_events_to_an_open_transcript_once(cast, batch):
    trial = Trial.objects.filter(run__batch=batch).first()
    Turn.objects.create(trial=trial, index=0, prompt="Add a /health route")
    add_events(trial, 3)

    async def scenario():
        ws = connect(
            f"/ws/batches/{batch.pk}/?watch=trial&trial={trial.pk}&after=2&turn=0", cast.alice
        )
        assert (await ws.connect())[0]
        await ws.receive_from(
            timeout=10
        )  # the summary on connect: nothing new in the transcript yet
        await sync_to_async(add_events)(trial, 2, start_seq=3, text="fresh")
        await sync_to_async(publishing.event_recorded)(trial_id=trial.pk, batch_id=batch.pk, seq=4)
        first = await ws.receive_from(timeout=10)
        # A repeated announcement of the same events sends nothing new.
        await sync_to_async(publishing.event_recorded)(trial_id=trial.pk, batch_id=batch.pk, seq=4)
        nothing = await ws.receive_nothing(timeout=0.2)
        await ws.disconnect()
        return first, nothing

    first, nothing = run_async(scenario)
    assert f'<div id="transcript-tail-{trial.pk}" hx-swap-oob="beforeend">' in first
    assert "fresh 3" in first and "fresh 4" in first
    assert "step 2" not in first
    assert "Add a /health route" not in first  # turn 0 was already on the page
    assert nothing


def test_it_catches_up_on_what_finished_between_the_page_and_the_socket(cast, batch):
    run = batch.runs.order_by("id").last()
    page_drawn = int((timezone.now() - timedelta(seconds=1)).timestamp() * 1000)
    for trial in run.trials.all():
        finish(trial, S.PASSED)

    async def scenario():
        ws = connect(f"/ws/batches/{batch.pk}/?watch=grid&since={page_drawn}", cast.alice)
        assert (await ws.connect())[0]
        html = await ws.receive_from(timeout=10)
        await ws.disconnect()
        return html

    html = run_async(scenario)
    cell = re.search(rf'<td id="cell-{run.pk}".*?</td>', html, re.S)
    assert cell and ">2/2<" in cell.group(0)


def test_it_updates_an_open_trial_pages_summary_and_checks_when_it_finishes(cast, batch):
    trial = Trial.objects.filter(run__batch=batch).first()

    async def scenario():
        ws = connect(f"/ws/batches/{batch.pk}/?watch=trial&trial={trial.pk}", cast.alice)
        assert (await ws.connect())[0]
        await ws.receive_from(timeout=10)  # the summary on connect
        await sync_to_async(finish)(trial, S.FAILED)
        await sync_to_async(make_checks)(
            trial, validator_passed=False, validator_message="no route"
        )
        await sync_to_async(publishing.trial_changed)(
            trial_id=trial.pk, run_id=trial.run_id, batch_id=batch.pk, status=S.FAILED
        )
        html = await ws.receive_from(timeout=10)
        await ws.disconnect()
        return html

    html = run_async(scenario)
    assert (
        f'<div id="trial-summary-{trial.pk}" class="trial-summary" hx-swap-oob="outerHTML">' in html
    )
    assert "status--failed" in html
    assert f'<section id="trial-checks-{trial.pk}" class="card" hx-swap-oob="outerHTML">' in html
    assert "no route" in html


def test_an_open_grid_shows_the_trials_a_budget_stopped(cast, batch):
    # Imported here: only this test stops a batch at its budget.
    from runner.jobs.budget import stop_if_over_budget

    batch.max_cost_usd = 0.5
    batch.save(update_fields=["max_cost_usd"])
    run = batch.runs.order_by("id").first()
    spender = run.trials.get(index=0)

    async def scenario():
        ws = connect(f"/ws/batches/{batch.pk}/?watch=grid", cast.bob)
        connected, _ = await ws.connect()
        assert connected
        await ws.receive_from(timeout=10)  # the status on connect
        await sync_to_async(spender.finish)(S.PASSED, cost_usd=0.6)
        ended = await sync_to_async(stop_if_over_budget)(batch)
        await sync_to_async(publishing.wait_until_sent)()
        html = await ws.receive_from(timeout=10)
        await ws.disconnect()
        return ended, html

    ended, html = run_async(scenario)

    assert ended == 7  # every trial but the one that spent the budget
    cell = re.search(rf'<td id="cell-{run.pk}".*?</td>', html, re.S)
    assert cell, html
    assert 'class="mark mark--budget"' in cell.group(0) and ">$1</span>" in cell.group(0)
    assert "not finished" not in cell.group(0)
