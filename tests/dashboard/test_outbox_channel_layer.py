"""The embedded mode's channel layer carries a message from one process's layer to another's
sockets through the outbox file, and leaves the rest to in-memory delivery."""

from __future__ import annotations

import asyncio
from pathlib import Path

from proctor.site.channel_layer import OutboxChannelLayer

GROUP = "batch-7"
MESSAGE = {"type": "trial.changed", "trial_id": 3, "run_id": 2, "batch_id": 7, "status": "passed"}


async def serving_socket(layer: OutboxChannelLayer) -> str:
    """A socket of the serving process, in the batch's group (as the consumer joins it)."""
    channel = await layer.new_channel()
    await layer.group_add(GROUP, channel)
    return channel


def test_a_message_sent_by_another_process_reaches_the_serving_processs_socket(tmp_path: Path):
    outbox = str(tmp_path / "proctor.sqlite3-live")
    serve, cli = OutboxChannelLayer(path=outbox), OutboxChannelLayer(path=outbox)

    async def scenario() -> dict:
        channel = await serving_socket(serve)
        receiving = asyncio.ensure_future(serve.receive(channel))
        await asyncio.sleep(0.3)  # the tail has started reading from the end of the outbox
        # `proctor eval` publishes from a trial's thread, on a loop of its own.
        await asyncio.to_thread(asyncio.run, cli.group_send(GROUP, MESSAGE))
        return await asyncio.wait_for(receiving, timeout=5)

    assert asyncio.run(scenario()) == MESSAGE


def test_the_serving_process_gets_its_own_message_once(tmp_path: Path):
    serve = OutboxChannelLayer(path=str(tmp_path / "outbox"))

    async def scenario() -> list[dict]:
        channel = await serving_socket(serve)
        await serve.group_send(GROUP, MESSAGE)
        first = await asyncio.wait_for(serve.receive(channel), timeout=5)
        await asyncio.sleep(1.0)  # several polls of the outbox
        try:
            again = await asyncio.wait_for(serve.receive(channel), timeout=0.3)
        except TimeoutError:
            return [first]
        return [first, again]

    assert asyncio.run(scenario()) == [MESSAGE]


def test_messages_from_before_the_server_started_are_not_replayed(tmp_path: Path):
    outbox = str(tmp_path / "outbox")
    earlier = OutboxChannelLayer(path=outbox)
    asyncio.run(earlier.group_send(GROUP, {**MESSAGE, "status": "running"}))
    serve = OutboxChannelLayer(path=outbox)

    async def scenario() -> dict | None:
        channel = await serving_socket(serve)
        try:
            return await asyncio.wait_for(serve.receive(channel), timeout=1.0)
        except TimeoutError:
            return None

    assert asyncio.run(scenario()) is None


def test_an_unwritable_outbox_still_delivers_in_memory(tmp_path: Path, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the outbox's folder should be")
    layer = OutboxChannelLayer(path=str(blocker / "outbox"))

    async def scenario() -> dict:
        channel = await layer.new_channel()
        await layer.group_add(GROUP, channel)
        await layer.group_send(GROUP, MESSAGE)
        await layer.group_send(GROUP, MESSAGE)
        return await asyncio.wait_for(layer.receive(channel), timeout=5)

    assert asyncio.run(scenario()) == MESSAGE
    warnings = [r for r in caplog.records if "live updates to other processes paused" in r.message]
    assert len(warnings) == 1


def test_a_chunk_of_messages_reaches_the_other_process_whole_and_in_order(tmp_path: Path):
    outbox = str(tmp_path / "proctor.sqlite3-live")
    serve, cli = OutboxChannelLayer(path=outbox), OutboxChannelLayer(path=outbox)
    chunk = [(GROUP, {**MESSAGE, "trial_id": n}) for n in range(1, 6)]

    async def scenario() -> list[dict]:
        channel = await serving_socket(serve)
        await asyncio.sleep(0.3)  # the tail has started reading from the end of the outbox
        await asyncio.to_thread(asyncio.run, cli.group_send_many(chunk))
        return [await asyncio.wait_for(serve.receive(channel), timeout=5) for _ in chunk]

    assert asyncio.run(scenario()) == [message for _, message in chunk]
