"""Live updates: the one publisher through which the runner tells browsers what changed.

Every message goes to the batch's channel group and names what changed by id; the dashboard's
consumer re-renders the affected fragments on the server. Message types:

- ``trial.changed``: ``trial_id``, ``run_id``, ``batch_id``, ``status``
- ``trial.event``: ``trial_id``, ``batch_id``, ``seq`` (a new transcript event was stored)
- ``batch.changed``: ``batch_id``, ``status``
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

log = logging.getLogger(__name__)


def batch_group(batch_id: int) -> str:
    return f"batch-{batch_id}"


def publish(batch_id: int, message: dict) -> None:
    """Send to the batch's group; a broken layer never breaks a trial, it only logs."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(batch_group(batch_id), message)
    except Exception:  # live updates are best effort; the database stays the record
        log.warning(
            "could not publish %s for batch %s", message.get("type"), batch_id, exc_info=True
        )


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
