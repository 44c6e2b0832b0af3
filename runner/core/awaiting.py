"""Running an eval's async function (a validator, a prepare) to its result from sync code.

``asyncio.run`` refuses to start inside a thread whose event loop is already running (a test
driving a browser, an async host); then the coroutine gets a thread of its own.
"""

from __future__ import annotations

import asyncio
import inspect
from concurrent.futures import ThreadPoolExecutor
from typing import Any


async def _wait(awaitable: Any) -> Any:
    return await awaitable


def resolved(value: Any) -> Any:
    """``value`` itself, or what it resolves to when it is awaitable."""
    if not inspect.isawaitable(value):
        return value
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_wait(value))
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="proctor-await") as pool:
        return pool.submit(asyncio.run, _wait(value)).result()
