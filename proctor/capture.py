"""Capturing what eval code prints, per thread.

Trials run side by side in one process's threads, so ``contextlib.redirect_stdout`` (which
swaps the process-wide ``sys.stdout``) would mix their output. Instead ``sys.stdout`` is wrapped
once by a router that sends a thread's writes to its capture buffer while one is open.
"""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_local = threading.local()
_install_lock = threading.Lock()


class _ThreadRoutedStream(io.TextIOBase):
    def __init__(self, fallback: Any) -> None:
        self._fallback = fallback

    def write(self, text: str) -> int:
        buffers = getattr(_local, "buffers", None)
        if buffers:
            return buffers[-1].write(text)
        return self._fallback.write(text)

    def flush(self) -> None:
        if not getattr(_local, "buffers", None):
            self._fallback.flush()

    def isatty(self) -> bool:
        return self._fallback.isatty()

    def fileno(self) -> int:
        return self._fallback.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._fallback, "encoding", "utf-8")


def _install() -> None:
    with _install_lock:
        if not isinstance(sys.stdout, _ThreadRoutedStream):
            sys.stdout = _ThreadRoutedStream(sys.stdout)
        if not isinstance(sys.stderr, _ThreadRoutedStream):
            sys.stderr = _ThreadRoutedStream(sys.stderr)


@contextmanager
def capture_output() -> Iterator[io.StringIO]:
    """Collect what this thread prints (stdout and stderr) while the block runs."""
    _install()
    buffer = io.StringIO()
    stack = getattr(_local, "buffers", None)
    if stack is None:
        stack = _local.buffers = []
    stack.append(buffer)
    try:
        yield buffer
    finally:
        stack.pop()
