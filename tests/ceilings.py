"""Guards against hanging, never claims about speed: a test waits for the condition it checks
(a process exited, a timeout was reported) under a ceiling generous enough to hold on a machine
at load 8. How fast something is belongs in bench/, where it is a figure, not a pass or fail."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Far beyond what any awaited step takes on a busy machine; only a hang reaches it.
HANG_CEILING_S = 120.0


def finishes(call: Callable[[], T], *, what: str, ceiling_s: float = HANG_CEILING_S) -> T:
    """``call()``'s result (or its exception), run on a thread; AssertionError when it is still
    going after ``ceiling_s`` (it hung)."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # re-raised on the test's thread
            failure.append(exc)

    worker = threading.Thread(target=run, name=f"ceiling: {what}", daemon=True)
    worker.start()
    worker.join(ceiling_s)
    if worker.is_alive():
        raise AssertionError(f"{what} still had not returned after {ceiling_s:.0f}s: it hangs")
    if failure:
        raise failure[0]
    return outcome[0]


def eventually(condition: Callable[[], object], *, ceiling_s: float = HANG_CEILING_S) -> bool:
    """Whether ``condition()`` comes true before ``ceiling_s``; polled every 20 ms."""
    deadline = time.monotonic() + ceiling_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
