"""The fake model server's part in a conversation test: it plays the responder and the judges
of a whole batch at once.

Trials of one batch run side by side, so one queue of replies would reach them in any order.
Instead every consultation is routed by who asks (the responder's instructions ask for a
"verdict", a judge's for "passed") and by which case asks: the first registered key (a
``[case:<id>]`` tag, or any text of the opening request) found in the consultation's message.
Each (role, key) has its own queue; a consultation nobody scripted gets HTTP 400 naming it, so
it shows up as ``dispatch_failed`` rather than hanging on retries.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from typing import Any

from fakes.openai_server import FakeModelServer, Reply

RESPONDER = "responder"
JUDGE = "judge"
# The server's queue holds this many routing calls; more than any test makes.
ROUTED_REQUESTS = 1000


def answer(reply: str, reason: str = "the agent asked and marked an option as recommended") -> str:
    return json.dumps({"verdict": "answer", "reply": reply, "reason": reason})


def done(reason: str = "the agent reports the work finished") -> str:
    return json.dumps({"verdict": "done", "reason": reason})


def graded(passed: bool, score: float | None = None, reason: str = "graded by the rubric") -> str:
    return json.dumps(
        {
            "passed": passed,
            "score": (1.0 if passed else 0.0) if score is None else score,
            "reason": reason,
        }
    )


class ModelScript:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[tuple[str, str], deque[Any]] = defaultdict(deque)
        self._keys: list[str] = []
        # What each (role, key) was sent, in order: the request bodies.
        self.received: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)

    def install(self, server: FakeModelServer) -> ModelScript:
        server.script(*[self] * ROUTED_REQUESTS)
        return self

    def _register(self, role: str, key: str, replies: tuple[Any, ...]) -> None:
        with self._lock:
            if key not in self._keys:
                self._keys.append(key)
            self._queues[(role, key)].extend(replies)

    def responder(self, key: str, *replies: Any) -> None:
        """Queue the responder's answers to the case whose opening request holds ``key``."""
        self._register(RESPONDER, key, replies)

    def judge(self, key: str, *replies: Any) -> None:
        self._register(JUDGE, key, replies)

    def sent(self, role: str, key: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.received[(role, key)])

    def __call__(self, body: Any) -> Any:
        messages = body.get("messages", []) if isinstance(body, dict) else []
        system = next((m["content"] for m in messages if m.get("role") == "system"), "")
        text = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "system")
        role = JUDGE if '"passed"' in system else RESPONDER if '"verdict"' in system else "unknown"
        with self._lock:
            key = next((k for k in self._keys if k in text), None)
            if key is not None:
                self.received[(role, key)].append(body)
            queue = self._queues.get((role, key)) if key is not None else None
            scripted = queue.popleft() if queue else None
        if scripted is None:
            return Reply(
                status=400,
                body={
                    "error": {"message": f"nothing scripted for this {role} consultation ({key})"}
                },
            )
        return scripted
