"""One mock's call log, filled from the server's threads while the trial runs."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from runner.core.mock_calls import MockCall, MockLog
from runner.core.redaction import REDACTED

# Headers whose values are credentials, whatever the value looks like.
SECRET_HEADER = re.compile(r"authorization|cookie|api[-_]?key|token|secret|password|auth", re.I)
# Text kept per body, stdin or output in the log.
MAX_LOGGED_CHARS = 20_000


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    """The headers as logged: credential headers' values replaced (names kept, so a check can
    still see that the agent sent one)."""
    return {
        name: REDACTED if SECRET_HEADER.search(name) else value for name, value in headers.items()
    }


def clip_logged(value: Any) -> Any:
    """``value`` as logged: long text cut, and structures copied as JSON, so a handler that
    later changes what it answered (an order in the state) does not rewrite the log."""
    if isinstance(value, str):
        if len(value) > MAX_LOGGED_CHARS:
            return value[:MAX_LOGGED_CHARS] + f"… [{len(value) - MAX_LOGGED_CHARS} characters cut]"
        return value
    if isinstance(value, dict | list | tuple):
        return clip_logged_json(json.loads(json.dumps(value, default=str)))
    return value


def clip_logged_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: clip_logged_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clip_logged_json(v) for v in value]
    return clip_logged(value)


class CallLog:
    """The calls one mock received, in arrival order; safe to add to from any thread."""

    def __init__(self, mock: str, kind: str) -> None:
        self.mock = mock
        self.kind = kind
        self._calls: list[MockCall] = []
        self._lock = threading.Lock()
        # Told of each call as it is logged (the trial's recorder, to show it live).
        self.listener: Callable[[MockCall], None] | None = None

    def add(self, *, started: float, **fields: Any) -> MockCall:
        """Log a call that started at ``started`` (time.time()) and ends now."""
        fields = {k: clip_logged(v) for k, v in fields.items()}
        with self._lock:
            call = MockCall(
                mock=self.mock,
                kind=self.kind,
                seq=len(self._calls) + 1,
                at=started,
                duration_ms=int((time.time() - started) * 1000),
                **fields,
            )
            self._calls.append(call)
        listener = self.listener
        if listener is not None:
            listener(call)
        return call

    def snapshot(self) -> MockLog:
        with self._lock:
            return MockLog(self.mock, self.kind, list(self._calls))
