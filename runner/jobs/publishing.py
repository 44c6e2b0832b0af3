"""Live updates: the one publisher through which the runner tells browsers what changed.

Every message goes to the batch's channel group and names what changed by id; the dashboard's
consumer re-renders the affected fragments on the server. Message types:

- ``trial.changed``: ``trial_id``, ``run_id``, ``batch_id``, ``status``
- ``trial.event``: ``trial_id``, ``batch_id``, ``seq`` (a new transcript event was stored)
- ``batch.changed``: ``batch_id``, ``status``
"""

from __future__ import annotations

import logging
import threading
from typing import Any
from urllib.parse import urlsplit

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)

# What an unreachable channel layer raises: redis-py's connection and timeout errors, or the
# socket's own OSError (refused, reset) when it escapes redis-py.
LAYER_UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)


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
        except LAYER_UNREACHABLE:
            # After Redis restarts, the pool's first connection is the dead one: redis-py drops
            # it, and a second attempt on a fresh connection delivers the message.
            async_to_sync(layer.group_send)(batch_group(batch_id), message)
    except LAYER_UNREACHABLE as error:
        outage.failed(layer, error)
        return
    except Exception:  # live updates are best effort; the database stays the record
        log.warning(
            "could not publish %s for batch %s", message.get("type"), batch_id, exc_info=True
        )
        return
    outage.worked(layer)


def trial_changed(*, trial_id: int, run_id: int, batch_id: int, status: str) -> None:
    publish(
        batch_id,
        {
            "type": "trial.changed",
            "trial_id": trial_id,
            "run_id": run_id,
            "batch_id": batch_id,
            "status": status,
        },
    )


def event_recorded(*, trial_id: int, batch_id: int, seq: int) -> None:
    publish(
        batch_id, {"type": "trial.event", "trial_id": trial_id, "batch_id": batch_id, "seq": seq}
    )


def batch_changed(*, batch_id: int, status: str) -> None:
    publish(batch_id, {"type": "batch.changed", "batch_id": batch_id, "status": status})
