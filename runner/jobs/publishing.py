"""Live updates: the one publisher through which the runner tells browsers what changed.

Every message goes to the batch's channel group and names what changed by id; the dashboard's
consumer re-renders the affected fragments on the server. Message types:

- ``trial.changed``: ``trial_id``, ``run_id``, ``batch_id``, ``status``
- ``trial.event``: ``trial_id``, ``batch_id``, ``seq`` (a new transcript event was stored)
- ``batch.changed``: ``batch_id``, ``status``

A running trial does not wait for its messages: the recorder hands them to ``send_later``, and
one sender thread per process (with one event loop, so the layer keeps its connection) delivers
them in order, in chunks: what arrives within GATHER_S of a chunk's first message (BUSY_GATHER_S
after a chunk of several), or piles up while it sends, goes together. A chunk is thinned first:
of a trial's ``trial.event`` messages only the newest seq goes (the page re-reads every event up
to it), and of its ``trial.changed`` only the last status, so a busy stream costs one message
per flush at most, and many trials ending together cost one delivery (one outbox transaction in
the embedded mode). The process waits for the sender before it exits (``wait_until_sent``).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import queue
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

log = logging.getLogger(__name__)


def unreachable_errors() -> tuple[type[BaseException], ...]:
    """What an unreachable channel layer raises: redis-py's connection and timeout errors, or
    the socket's own OSError (refused, reset) when it escapes redis-py. Asked only once
    something was raised (``except unreachable_errors():``): importing redis costs a tenth of
    `proctor eval`'s start-up, and the embedded layer never needs it."""
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    return (RedisConnectionError, RedisTimeoutError, OSError)


def __getattr__(name: str) -> Any:
    # ``LAYER_UNREACHABLE``, the same tuple by name, for the web side (dashboard/consumers.py)
    # whose start-up does not count.
    if name == "LAYER_UNREACHABLE":
        return unreachable_errors()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def layer_address(layer: Any) -> str:
    """Where the channel layer's Redis is, for a log line (no password: only host and port)."""
    hosts = getattr(layer, "hosts", None) or []
    if not hosts:
        return "the channel layer"
    host = hosts[0]
    address = host.get("address", host) if isinstance(host, dict) else host
    if isinstance(address, (tuple, list)):
        return ":".join(str(part) for part in address)
    url = urlsplit(str(address))
    return f"{url.hostname}:{url.port or 6379}" if url.hostname else str(address)


class LayerOutage:
    """One warning when the layer becomes unreachable and one info line when it answers again,
    instead of a traceback per message: an outage is a state, not a stream of errors. The
    layer reconnects by itself (channels-redis opens a new connection on the next call)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.down = False

    def failed(self, layer: Any, error: BaseException) -> None:
        with self._lock:
            first, self.down = not self.down, True
        if first:
            log.warning(
                "live updates paused: Redis at %s is unreachable (%s); retrying",
                layer_address(layer),
                str(error) or type(error).__name__,
            )

    def worked(self, layer: Any) -> None:
        with self._lock:
            recovered, self.down = self.down, False
        if recovered:
            log.info("live updates resumed: Redis at %s is reachable again", layer_address(layer))


outage = LayerOutage()


def batch_group(batch_id: int) -> str:
    return f"batch-{batch_id}"


def publish(batch_id: int, message: dict) -> None:
    """Send to the batch's group; a broken layer never breaks a trial, it only logs."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        try:
            async_to_sync(layer.group_send)(batch_group(batch_id), message)
        except unreachable_errors():
            # After Redis restarts, the pool's first connection is the dead one: redis-py drops
            # it, and a second attempt on a fresh connection delivers the message.
            async_to_sync(layer.group_send)(batch_group(batch_id), message)
    except unreachable_errors() as error:
        outage.failed(layer, error)
        return
    except Exception:  # live updates are best effort; the database stays the record
        log.warning(
            "could not publish %s for batch %s", message.get("type"), batch_id, exc_info=True
        )
        return
    outage.worked(layer)


# How long the sender lets messages gather after the first of a chunk: trials ending together
# then cost one delivery (and one outbox transaction) instead of one each. After a chunk of
# several messages (trials ending one after another, a few milliseconds apart) it waits longer:
# more of each trial's messages are then thinned into one, and a lone message (one trial's
# flush) still goes within GATHER_S.
GATHER_S = 0.02
BUSY_GATHER_S = 0.05


class _Sender(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="proctor-publisher", daemon=True)
        self.waiting: queue.Queue[tuple[int, dict]] = queue.Queue()

    def run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        gather_s = GATHER_S
        while True:
            chunk = [self.waiting.get()]
            time.sleep(gather_s)
            while True:
                try:
                    chunk.append(self.waiting.get_nowait())
                except queue.Empty:
                    break
            gather_s = BUSY_GATHER_S if len(chunk) > 1 else GATHER_S
            try:
                loop.run_until_complete(_send_all(thinned(chunk)))
            finally:
                for _ in chunk:
                    self.waiting.task_done()


async def _send_all(chunk: list[tuple[int, dict]]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    send_many = getattr(layer, "group_send_many", None)
    if send_many is None:
        for batch_id, message in chunk:
            await _send(batch_id, message)
        return
    try:
        await send_many([(batch_group(batch_id), message) for batch_id, message in chunk])
    except Exception:
        log.warning("could not publish %d live updates", len(chunk), exc_info=True)


async def _send(batch_id: int, message: dict) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        try:
            await layer.group_send(batch_group(batch_id), message)
        except unreachable_errors():
            await layer.group_send(batch_group(batch_id), message)  # see publish()
    except unreachable_errors() as error:
        outage.failed(layer, error)
        return
    except Exception:
        log.warning(
            "could not publish %s for batch %s", message.get("type"), batch_id, exc_info=True
        )
        return
    outage.worked(layer)


def thinned(chunk: list[tuple[int, dict]]) -> list[tuple[int, dict]]:
    """``chunk`` in order, with each trial's ``trial.event`` messages reduced to the last one,
    and its ``trial.changed`` messages too (each at its place: after what it covers, before
    whatever came after it). A page re-reads the trial from the database on either, so the
    last one says all the earlier ones did."""
    last: dict[tuple[str, int], int] = {}
    for position, (_, message) in enumerate(chunk):
        if message.get("type") in THINNED:
            last[message["type"], message["trial_id"]] = position
    return [
        item
        for position, item in enumerate(chunk)
        if item[1].get("type") not in THINNED
        or last[item[1]["type"], item[1]["trial_id"]] == position
    ]


THINNED = ("trial.event", "trial.changed")


_sender: _Sender | None = None
_sender_lock = threading.Lock()


def _forget_in_child() -> None:
    """A forked child sends through a sender of its own, started on its first message: the
    parent's thread did not come along, nor, safely, its lock."""
    global _sender, _sender_lock
    _sender, _sender_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


def send_later(batch_id: int, message: dict) -> None:
    """Queue ``message`` for the batch's group and return at once (see the module docstring)."""
    global _sender
    with _sender_lock:
        if _sender is None or not _sender.is_alive():
            _sender = _Sender()
            _sender.start()
            atexit.register(wait_until_sent)
        sender = _sender
    sender.waiting.put((batch_id, message))


def wait_until_sent(timeout_s: float = 10.0) -> bool:
    """Wait (up to ``timeout_s``) for every message given to ``send_later``; False on timeout."""
    sender = _sender
    if sender is None:
        return True
    done = threading.Event()

    def join() -> None:
        sender.waiting.join()
        done.set()

    threading.Thread(target=join, daemon=True).start()
    return done.wait(timeout_s)


def trial_changed(
    *, trial_id: int, run_id: int, batch_id: int, status: str, wait: bool = True
) -> None:
    """``wait`` False: queued for the sender thread (a running trial does not wait for it)."""
    (publish if wait else send_later)(
        batch_id,
        {
            "type": "trial.changed",
            "trial_id": trial_id,
            "run_id": run_id,
            "batch_id": batch_id,
            "status": status,
        },
    )


def event_recorded(*, trial_id: int, batch_id: int, seq: int, wait: bool = True) -> None:
    (publish if wait else send_later)(
        batch_id, {"type": "trial.event", "trial_id": trial_id, "batch_id": batch_id, "seq": seq}
    )


def batch_changed(*, batch_id: int, status: str, wait: bool = True) -> None:
    (publish if wait else send_later)(
        batch_id, {"type": "batch.changed", "batch_id": batch_id, "status": status}
    )
