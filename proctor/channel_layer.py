"""An in-memory channel layer that is safe to feed from worker threads.

The stock InMemoryChannelLayer, sent to from a trial's thread, delivers late (up to a second)
and breaks asyncio's thread-safety checks. This layer remembers the event loop that serves
websockets and hands every send from another thread to that loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from channels.layers import InMemoryChannelLayer


class ThreadSafeInMemoryChannelLayer(InMemoryChannelLayer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._serving_loop: asyncio.AbstractEventLoop | None = None

    def _remember_loop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._serving_loop = asyncio.get_running_loop()

    async def receive(self, channel: str) -> dict:
        self._remember_loop()
        return await super().receive(channel)

    async def group_add(self, group: str, channel: str) -> None:
        self._remember_loop()
        await super().group_add(group, channel)

    async def group_send(self, group: str, message: dict) -> None:
        loop = self._serving_loop
        current = asyncio.get_running_loop()
        if loop is None or loop is current or loop.is_closed():
            await super().group_send(group, message)
            return
        future = asyncio.run_coroutine_threadsafe(super().group_send(group, message), loop)
        await asyncio.wrap_future(future)
