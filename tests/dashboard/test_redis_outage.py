"""Redis restarted mid-batch: live updates pause with one warning, never a traceback, and
resume with one info line, on a real redis-server this test starts and kills.

The fault used to be five tracebacks in the web server's log (the publisher and the websocket
consumer each raising redis-py's ConnectionError).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from conftest import free_port, tier_unavailable
from factories import make_batch_with_grid, make_cast
from private_redis import RedisServer

from dashboard.routing import websocket_urlpatterns
from evals_app.models import Trial
from runner.jobs import publishing

LOGGER = "runner.jobs.publishing"


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        tier_unavailable("redis", "redis-server is not installed")
    server = RedisServer(free_port())
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def redis_layer(settings, redis_server):
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [f"redis://127.0.0.1:{redis_server.port}/0"]},
        }
    }
    publishing.outage.down = False
    yield get_channel_layer()
    publishing.outage.down = False


def listen(layer) -> str:
    """A channel in batch 7's group, as a connected page would be."""

    async def join() -> str:
        channel = await layer.new_channel()
        await layer.group_add(publishing.batch_group(7), channel)
        return channel

    return async_to_sync(join)()


def received(layer, channel: str) -> dict:
    async def receive() -> dict:
        return await layer.receive(channel)

    return async_to_sync(receive)()


def in_plain_thread(func) -> None:
    """Run ``func`` in a thread with no event loop: an earlier test in the same session (the
    browser tier's Playwright) may leave one running in the main thread, where async_to_sync
    refuses to work. The web server's publisher always runs in such a plain thread."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(func).result()


def test_a_redis_outage_is_one_warning_and_one_recovery_line(
    redis_server, redis_layer, caplog
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    in_plain_thread(lambda: outage_story(redis_server, redis_layer, caplog))


def outage_story(redis_server, redis_layer, caplog) -> None:
    channel = listen(redis_layer)
    publishing.batch_changed(batch_id=7, status="running")
    assert received(redis_layer, channel)["status"] == "running"

    redis_server.kill()
    for _ in range(5):
        publishing.batch_changed(batch_id=7, status="running")  # never raises into the trial
    publishing.trial_changed(trial_id=1, run_id=2, batch_id=7, status="passed")
    publishing.event_recorded(trial_id=1, batch_id=7, seq=3)

    records = [r for r in caplog.records if r.name == LOGGER]
    assert [r.levelname for r in records] == ["WARNING"]
    assert records[0].exc_info is None  # a line, not a traceback
    message = records[0].getMessage()
    assert message.startswith(
        f"live updates paused: Redis at 127.0.0.1:{redis_server.port} is unreachable ("
    )
    assert message.endswith("); retrying")

    redis_server.start()  # a restarted Redis has forgotten the group: the page joins again
    channel = listen(redis_layer)
    publishing.batch_changed(batch_id=7, status="finished")
    publishing.batch_changed(batch_id=7, status="finished")
    assert received(redis_layer, channel)["status"] == "finished"

    records = [r for r in caplog.records if r.name == LOGGER]
    assert [r.levelname for r in records] == ["WARNING", "INFO"]
    assert records[1].getMessage().startswith("live updates resumed")
    assert "Traceback" not in caplog.text


@pytest.mark.django_db
def test_an_open_page_survives_the_outage_and_rejoins_its_batch(
    redis_server, redis_layer, caplog, monkeypatch
) -> None:
    monkeypatch.setattr("channels.db.close_old_connections", lambda: None)
    monkeypatch.setattr("dashboard.consumers.RETRY_SECONDS", 0.1)
    caplog.set_level(logging.INFO, logger=LOGGER)
    cast = make_cast()
    batch = make_batch_with_grid(cast.acme, cases=1, variants=1, trials=1)
    trial = Trial.objects.filter(run__batch=batch).get()

    async def wait_until(condition, seconds: float = 15) -> None:
        deadline = time.monotonic() + seconds
        while not condition():
            assert time.monotonic() < deadline, "timed out"
            await asyncio.sleep(0.05)

    async def scenario() -> str:
        ws = WebsocketCommunicator(
            URLRouter(websocket_urlpatterns), f"/ws/batches/{batch.pk}/?watch=grid"
        )
        ws.scope["user"] = cast.alice
        connected, _ = await ws.connect(timeout=10)
        assert connected
        await ws.receive_from(timeout=10)  # the status on connect

        await sync_to_async(redis_server.kill)()
        await wait_until(lambda: publishing.outage.down)
        for _ in range(3):
            await sync_to_async(publishing.batch_changed)(batch_id=batch.pk, status="running")
        await sync_to_async(redis_server.start)()
        await wait_until(lambda: not publishing.outage.down)  # the page joined again

        await sync_to_async(publishing.trial_changed)(
            trial_id=trial.pk, run_id=trial.run_id, batch_id=batch.pk, status="passed"
        )
        html = await ws.receive_from(timeout=10)
        await ws.disconnect()
        return html

    html = async_to_sync(scenario)()
    assert f'id="cell-{trial.run_id}"' in html
    records = [r for r in caplog.records if r.name == LOGGER]
    assert [r.levelname for r in records] == ["WARNING", "INFO"]
    assert all(r.exc_info is None for r in records)
    assert "Traceback" not in caplog.text
