"""`proctor eval` stopped by SIGTERM or SIGHUP ends as a Ctrl-C does.

What stops a run from outside is seldom a keyboard: `timeout`, a CI job's cancel, `docker
stop` and systemd send SIGTERM, and a closed terminal sends SIGHUP. Python's default for
either is to die on the spot, which left the batch "running" with trials nobody ran, until a
later `proctor serve` re-queued and ran them. While ``stop_signals_interrupt`` is active, each
raises ``StopSignal`` in the main thread instead: a ``KeyboardInterrupt``, so every place that
closes a batch on Ctrl-C closes it on these too, and the command exits 128 + the signal's number,
as a shell reports a process killed by it.

A signal the command was started with ignored (``nohup`` ignores SIGHUP) stays ignored. After
the first stop signal both are ignored, so a second one cannot cut short the closing of the
batch (SIGKILL still can).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class StopSignal(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: handled wherever a Ctrl-C is."""

    def __init__(self, signum: int) -> None:
        self.signal_name = signal.Signals(signum).name
        # The command's exit status, as a shell gives it for a process the signal killed.
        self.exit_code = 128 + signum
        super().__init__(self.signal_name)

    @property
    def summary(self) -> str:
        """The one line a command with nothing of its own to close prints."""
        return f"Stopped ({self.signal_name})."


def exit_status(stop: KeyboardInterrupt) -> int:
    """The command's exit status after ``stop``: 130 for Ctrl-C, as shells give it."""
    return stop.exit_code if isinstance(stop, StopSignal) else 130


def _raise_stop(signum: int, _frame: object) -> None:
    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_IGN)
    raise StopSignal(signum)


@contextlib.contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise ``StopSignal`` (outside the main thread, where no
    handler can be set, nothing changes); the previous handlers come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for number in STOP_SIGNALS:
        if signal.getsignal(number) is not signal.SIG_IGN:
            previous[number] = signal.signal(number, _raise_stop)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
