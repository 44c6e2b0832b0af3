"""A websocket query value that is a whole number no database column holds (a 100-digit run,
trial, after, turn or since) closes the socket cleanly, as a bad page id answers 404; it used
to reach the query and raise OverflowError inside the consumer."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from factories import make_batch_with_grid, make_cast

from dashboard.routing import websocket_urlpatterns
from evals_app.models import Trial

pytestmark = pytest.mark.django_db

application = URLRouter(websocket_urlpatterns)
HUGE = "9" * 100


@pytest.fixture(autouse=True)
def keep_the_test_transactions_connection(monkeypatch):
    monkeypatch.setattr("channels.db.close_old_connections", lambda: None)


def test_it_closes_the_socket_for_a_number_too_large_for_the_database():
    cast = make_cast()
    batch = make_batch_with_grid(cast.acme, cases=1, variants=1, trials=1)
    trial = Trial.objects.filter(run__batch=batch).get()
    queries = [
        f"watch=run&run={HUGE}",
        f"watch=trial&trial={HUGE}",
        f"watch=trial&trial={trial.pk}&after={HUGE}",
        f"watch=trial&trial={trial.pk}&turn=-{HUGE}",
        f"watch=grid&since={HUGE}",
        f"watch=trial&trial={'1' * 5000}",
    ]

    async def scenario() -> list[bool]:
        results = []
        for query in queries:
            ws = WebsocketCommunicator(application, f"/ws/batches/{batch.pk}/?{query}")
            ws.scope["user"] = cast.alice
            connected, _ = await ws.connect(timeout=10)
            results.append(connected)
            await ws.disconnect()
        return results

    assert async_to_sync(scenario)() == [False] * len(queries)


def test_it_still_opens_the_socket_for_numbers_that_fit():
    cast = make_cast()
    batch = make_batch_with_grid(cast.acme, cases=1, variants=1, trials=1)
    trial = Trial.objects.filter(run__batch=batch).get()

    async def scenario() -> bool:
        query = f"watch=trial&trial={trial.pk}&after=-1&turn=-1&since=1700000000000"
        ws = WebsocketCommunicator(application, f"/ws/batches/{batch.pk}/?{query}")
        ws.scope["user"] = cast.alice
        connected, _ = await ws.connect(timeout=10)
        await ws.disconnect()
        return connected

    assert async_to_sync(scenario)() is True
