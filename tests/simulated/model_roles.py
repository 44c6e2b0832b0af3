"""The fake model server's part in these tests: it plays every simulated user, every judge and
every chat agent of a batch at once.

Trials of one batch run side by side, so each request is routed by who asks (a judge's
instructions ask for a "passed" verdict; a chat agent's system prompt holds AGENT_MARK; anything
else is a simulated user) and by a key: the first key registered for that role found anywhere in
the request's messages (a ``[sim:<id>]`` tag in a persona, a ``[case:<id>]`` tag in the
conversation a judge or an agent reads). Each (role, key) has its own queue; a request nobody
scripted gets HTTP 400 naming it, so it fails fast instead of hanging on retries.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from typing import Any

from fakes.openai_server import FakeModelServer, Reply

SIMULATED_USER = "simulated_user"
JUDGE = "judge"
AGENT = "agent"
AGENT_MARK = "[agent]"
ROUTED_REQUESTS = 1000


def graded(passed: bool, score: float | None = None, reason: str = "graded by the rubric") -> str:
    return json.dumps(
        {
            "passed": passed,
            "score": (1.0 if passed else 0.0) if score is None else score,
            "reason": reason,
        }
    )


class ModelRoles:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[tuple[str, str], deque[Any]] = defaultdict(deque)
        self._keys: dict[str, list[str]] = defaultdict(list)
        self.received: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)

    def install(self, server: FakeModelServer) -> ModelRoles:
        server.script(*[self] * ROUTED_REQUESTS)
        return self

    def _register(self, role: str, key: str, replies: tuple[Any, ...]) -> None:
        with self._lock:
            if key not in self._keys[role]:
                self._keys[role].append(key)
            self._queues[(role, key)].extend(replies)

    def simulated_user(self, key: str, *replies: Any) -> None:
        """Queue what the persona holding ``key`` says next, one reply per consultation."""
        self._register(SIMULATED_USER, key, replies)

    def judge(self, key: str, *replies: Any) -> None:
        self._register(JUDGE, key, replies)

    def agent(self, key: str, *replies: Any) -> None:
        """Queue the chat agent's model answers for the conversation holding ``key``."""
        self._register(AGENT, key, replies)

    def sent(self, role: str, key: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.received[(role, key)])

    def __call__(self, body: Any) -> Any:
        messages = body.get("messages", []) if isinstance(body, dict) else []
        system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        text = "\n".join(str(m.get("content", "")) for m in messages)
        role = JUDGE if '"passed"' in system else AGENT if AGENT_MARK in system else SIMULATED_USER
        with self._lock:
            key = next((k for k in self._keys[role] if k in text), None)
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
