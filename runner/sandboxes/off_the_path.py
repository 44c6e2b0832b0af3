"""Work a trial hands off so that it need not wait for it: one background thread per kind of
work and process, started on first use (again should it have died), that the process waits
for before it exits. An item whose work raises is said in one line on the log, and the items
behind it are still done: a thread that died with them queued would leave them until the next
``put``, and ``join`` waiting for ever."""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

Item = TypeVar("Item")

log = logging.getLogger(__name__)


class OffThePath(Generic[Item]):
    """``work(item)`` for each item given to ``put``, in order, on one daemon thread."""

    def __init__(self, name: str, work: Callable[[Item], None]) -> None:
        self.name = name
        self.work = work
        self._start_afresh()
        _every.add(self)

    def _start_afresh(self) -> None:
        """No thread and nothing queued: how it is made, and how a forked child finds it (the
        thread and the items are the parent's, and its lock may have been held at the fork)."""
        self._items: queue.Queue[Item] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._waited_at_exit = False

    def put(self, item: Item) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
                if not self._waited_at_exit:
                    atexit.register(self.join)
                    self._waited_at_exit = True
        self._items.put(item)

    def join(self) -> None:
        """Block until every item given so far is done."""
        self._items.join()

    def _run(self) -> None:
        while True:
            item = self._items.get()
            try:
                self.work(item)
            except Exception as exc:
                log.error(
                    "%s could not finish %r: %s: %s", self.name, item, type(exc).__name__, exc
                )
            finally:
                self._items.task_done()


_every: weakref.WeakSet[OffThePath] = weakref.WeakSet()


def _forget_in_child() -> None:
    for off_the_path in list(_every):
        off_the_path._start_afresh()


os.register_at_fork(after_in_child=_forget_in_child)
