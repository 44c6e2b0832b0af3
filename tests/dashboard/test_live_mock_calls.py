"""An open trial page gets each mock call as the recorder stores it (the live-update path),
once, with the Mocks card redrawn; a reload mid-trial shows the calls and goes on from them."""

from __future__ import annotations

import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.urls import reverse
from factories import add_events, make_batch_with_grid, make_cast

from dashboard.routing import websocket_urlpatterns
from evals_app.models import MockCall, Trial, Turn
from runner.jobs import publishing
from runner.jobs.database_recorder import DatabaseRecorder

pytestmark = pytest.mark.django_db
application = URLRouter(websocket_urlpatterns)
OWNER = "test-process"  # the lease the trial runs under: the recorder writes only under it


@pytest.fixture
def keep_the_test_transactions_connection(monkeypatch):
    monkeypatch.setattr("channels.db.close_old_connections", lambda: None)


def refund_record(seq: int, at: float) -> dict:
    return {
        "mock": "billing",
        "kind": "api",
        "seq": seq,
        "at": at,
        "duration_ms": 3,
        "method": "POST",
        "path": "/refunds",
        "status": 201,
        "json": {"order_id": 42},
        "body": {"order_id": 42},
        "response": {"id": f"re_{seq}"},
        "headers": {"content-type": "application/json"},
    }


def test_an_open_trial_page_gets_a_call_as_it_is_stored_and_a_reload_shows_it(
    client, keep_the_test_transactions_connection
) -> None:
    cast = make_cast()
    batch = make_batch_with_grid(
        cast.acme, cases=1, variants=1, trials=1, status=lambda c, v, t: Trial.Status.RUNNING
    )
    trial = Trial.objects.filter(run__batch=batch).get()
    Trial.objects.filter(pk=trial.pk).update(lease_owner=OWNER)
    Turn.objects.create(trial=trial, index=0, prompt="Refund order 42")
    add_events(trial, 2)
    client.force_login(cast.alice)
    page = client.get(reverse("trial", args=[trial.pk])).content.decode()
    assert "&amp;calls=-1" in page  # no call shown yet: the socket asks for every later one

    recorder = DatabaseRecorder(trial, owner=OWNER)
    recorder.mock_call(refund_record(1, time.time()))
    recorder.flush()  # what the flusher does within a second of the call
    (row,) = MockCall.objects.filter(trial=trial)

    async def scenario():
        ws = WebsocketCommunicator(
            application, f"/ws/batches/{batch.pk}/?watch=trial&trial={trial.pk}&after=1&turn=0"
        )
        ws.scope["user"] = cast.alice
        assert (await ws.connect())[0]
        caught_up = await ws.receive_from(timeout=10)  # stored before the socket opened
        recorder.mock_call(refund_record(2, time.time()))
        await sync_to_async(recorder.flush)()
        # The flush's own live update goes out on the sender thread: sent before the test's
        # own, so a slow machine cannot deliver it after the check that nothing more comes.
        assert await sync_to_async(publishing.wait_until_sent)()
        await sync_to_async(publishing.event_recorded)(trial_id=trial.pk, batch_id=batch.pk, seq=1)
        live = await ws.receive_from(timeout=10)
        await sync_to_async(publishing.event_recorded)(trial_id=trial.pk, batch_id=batch.pk, seq=1)
        nothing = await ws.receive_nothing(timeout=0.3)
        await ws.disconnect()
        return caught_up, live, nothing

    caught_up, live, nothing = async_to_sync(scenario)()
    second = MockCall.objects.get(trial=trial, seq=2)
    assert f'id="mock-call-{row.pk}"' in caught_up and "/refunds" in caught_up
    assert f'id="mock-call-{second.pk}"' in live
    assert f'id="mock-call-{row.pk}"' not in live  # each call is sent once
    assert "re_2" in live
    assert '<section class="card" id="mocks" hx-swap-oob="outerHTML">' in live
    assert nothing
    # A reload mid-trial shows both, and its socket goes on from the newest.
    reloaded = client.get(reverse("trial", args=[trial.pk])).content.decode()
    assert f'id="mock-call-{row.pk}"' in reloaded and f'id="mock-call-{second.pk}"' in reloaded
    assert f"&amp;calls={second.pk}" in reloaded
