"""The embedded mode's channel layers: in memory, and shared between processes on one machine.

``ThreadSafeInMemoryChannelLayer``: the stock InMemoryChannelLayer, sent to from a trial's
thread, delivers late (up to a second) and breaks asyncio's thread-safety checks. This layer
remembers the event loop that serves websockets and hands every send from another thread to
that loop.

``OutboxChannelLayer``: with no Redis, `proctor eval` in one terminal and `proctor serve` in
another are two processes with two memories, so a CLI batch never reached an open page. This
layer keeps the in-memory delivery and also appends every ``group_send`` to a small SQLite file
(the outbox, beside the database). A process that serves websockets (it calls ``receive``)
tails the outbox a few times a second and delivers the other processes' messages to its own
sockets, which re-render from the database as they do for local messages. Only group messages
cross (the runner publishes nothing else); groups themselves stay in the serving process, where
the sockets are. Rows older than KEEP_SECONDS are pruned, so the file stays small.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from channels.layers import InMemoryChannelLayer

log = logging.getLogger(__name__)


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


# How often a serving process reads the outbox: well inside the 2 s a page may lag.
POLL_SECONDS = 0.25
# How long a message stays in the outbox; a page that connects later catches up from the
# database, not from here.
KEEP_SECONDS = 60.0
# A writer prunes old rows once every this many messages.
PRUNE_EVERY = 200

SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    origin TEXT NOT NULL,
    grp TEXT NOT NULL,
    message TEXT NOT NULL,
    created REAL NOT NULL
)
"""


class Outbox:
    """The SQLite file the processes share. A writer keeps one connection per thread (the
    publisher's sender thread, in practice) and appends a whole chunk of messages in one
    transaction; a reader opens a short connection per poll. WAL lets the serving process read
    while a trial's thread writes. The file is a relay, not a record (rows live a minute, pages
    catch up from the database), so its commits are not synced to the disk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._ready = False
        self._writers = threading.local()

    def _connect(self) -> sqlite3.Connection:
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=5, isolation_level=None)
        if not self._ready:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute(SCHEMA)
            self._ready = True
        return connection

    def _writer(self) -> sqlite3.Connection:
        connection = getattr(self._writers, "connection", None)
        if connection is None:
            connection = self._connect()
            connection.execute("PRAGMA synchronous=OFF")
            self._writers.connection = connection
        return connection

    def append(self, origin: str, group: str, message: dict, *, prune: bool) -> None:
        self.append_many(origin, [(group, message)], prune=prune)

    def append_many(self, origin: str, messages: list[tuple[str, dict]], *, prune: bool) -> None:
        now = time.time()
        rows = [(origin, group, json.dumps(message), now) for group, message in messages]
        connection = self._writer()
        try:
            with connection:  # one transaction for the chunk
                connection.execute("BEGIN")
                connection.executemany(
                    "INSERT INTO outbox (origin, grp, message, created) VALUES (?, ?, ?, ?)", rows
                )
                if prune:
                    connection.execute(
                        "DELETE FROM outbox WHERE created < ?", (now - KEEP_SECONDS,)
                    )
        except (sqlite3.Error, OSError):
            # A file removed or replaced under us: the next chunk opens it afresh.
            self._writers.connection = None
            connection.close()
            raise

    def last_id(self) -> int:
        with contextlib.closing(self._connect()) as connection:
            return connection.execute("SELECT COALESCE(MAX(id), 0) FROM outbox").fetchone()[0]

    def after(self, last_id: int) -> list[tuple[int, str, str, str]]:
        with contextlib.closing(self._connect()) as connection:
            return connection.execute(
                "SELECT id, origin, grp, message FROM outbox WHERE id > ? ORDER BY id",
                (last_id,),
            ).fetchall()


class OutboxChannelLayer(ThreadSafeInMemoryChannelLayer):
    """In-memory delivery, plus the outbox for pages served by another process (see above).

    ``path`` is the outbox file; every process that should see each other's messages must name
    the same one (settings put it beside the SQLite database, under PROCTOR_HOME).
    """

    def __init__(self, *args: Any, path: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outbox = Outbox(Path(path))
        # Which rows this process wrote itself: those were delivered in memory already.
        self.origin = uuid.uuid4().hex
        self._sent = 0
        self._outbox_broken = False
        self._tail_task: asyncio.Task | None = None
        self._tail_off = False  # the outbox could not be opened: do not try on every receive

    def _remember_loop(self) -> None:
        super()._remember_loop()
        loop = self._serving_loop
        task = self._tail_task
        stale = task is None or task.done() or task.get_loop() is not loop
        if loop is not None and stale and not self._tail_off:
            self._tail_task = loop.create_task(self._tail())

    async def group_send(self, group: str, message: dict) -> None:
        await self.group_send_many([(group, message)])

    async def group_send_many(self, messages: list[tuple[str, dict]]) -> None:
        """Deliver in memory, then append all of them to the outbox in one transaction."""
        for group, message in messages:
            await ThreadSafeInMemoryChannelLayer.group_send(self, group, message)
        before, self._sent = self._sent, self._sent + len(messages)
        try:
            self.outbox.append_many(
                self.origin,
                messages,
                prune=before == 0 or before // PRUNE_EVERY != self._sent // PRUNE_EVERY,
            )
        except (sqlite3.Error, OSError, TypeError, ValueError) as error:
            # Pages served by this process already have the message; only other processes'
            # pages miss it, and they catch up on their next reload. Say so once.
            if not self._outbox_broken:
                log.warning(
                    "live updates to other processes paused: %s (%s)", self.outbox.path, error
                )
            self._outbox_broken = True
        else:
            self._outbox_broken = False

    async def _tail(self) -> None:
        """Deliver, to this process's sockets, what other processes publish from now on."""
        try:
            cursor = await asyncio.to_thread(self.outbox.last_id)
        except (sqlite3.Error, OSError) as error:
            log.warning(
                "live updates from other processes are off: %s (%s)", self.outbox.path, error
            )
            self._tail_off = True
            return
        while True:
            await asyncio.sleep(POLL_SECONDS)
            try:
                rows = await asyncio.to_thread(self.outbox.after, cursor)
            except (sqlite3.Error, OSError):
                continue  # a locked or briefly missing file: the next poll reads on
            for row_id, origin, group, message in rows:
                cursor = row_id
                if origin != self.origin:
                    with contextlib.suppress(ValueError):
                        await InMemoryChannelLayer.group_send(self, group, json.loads(message))
