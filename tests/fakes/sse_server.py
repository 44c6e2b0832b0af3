"""A fake model server that can stream: the FakeModelServer's scripts, answered as Server-Sent
Events when the reply is an :class:`SseStream`.

Agent CLIs stream every model call. Each streamed reply ends by closing the connection (the
``Connection: close`` pitfall: without it Claude Code waits for more after the first call), and
routes a CLI calls on the side (token counting, model lists, ``HEAD /``) are answered by fixed
handlers that never consume a test's script.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from fakes.openai_server import FakeModelServer, ReceivedRequest, Reply

# A fixed answer: the request body in, the JSON body out.
FixedAnswer = Callable[[Any], Any]


@dataclass
class SseStream:
    """A streamed answer: ``(event name or None, data)`` pairs, data as JSON unless a string."""

    events: list[tuple[str | None, Any]] = field(default_factory=list)

    def encode(self) -> bytes:
        chunks = []
        for name, data in self.events:
            text = data if isinstance(data, str) else json.dumps(data)
            chunks.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
        return "".join(chunks).encode()


class StreamingModelServer(FakeModelServer):
    """FakeModelServer plus streamed replies, fixed side routes, HEAD and GET."""

    def __init__(self) -> None:
        super().__init__()
        self._fixed: dict[tuple[str, str], FixedAnswer] = {}

    def answer_always(self, method: str, path: str, answer: FixedAnswer) -> None:
        """Answer ``method path`` with ``answer(body)`` every time, outside any script."""
        self._fixed[(method, path)] = answer

    def _record(self, request: ReceivedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _request(self, method: str) -> ReceivedRequest:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8", errors="replace") if length else ""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                return ReceivedRequest(
                    method=method,
                    path=self.path.split("?", 1)[0],
                    headers={name.lower(): value for name, value in self.headers.items()},
                    body=body,
                    raw=raw,
                )

            def _send(
                self,
                status: int,
                payload: Any,
                headers: dict[str, str] | None = None,
                *,
                head_only: bool = False,
            ) -> None:
                if isinstance(payload, SseStream):
                    data, content_type = payload.encode(), "text/event-stream"
                elif isinstance(payload, str):
                    data, content_type = payload.encode(), "text/plain; charset=utf-8"
                elif payload is None:
                    data, content_type = b"", "text/plain; charset=utf-8"
                else:
                    data, content_type = json.dumps(payload).encode(), "application/json"
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    self.send_header("Connection", "close")
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    if not head_only:
                        self.wfile.write(data)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up: nothing to tell it
                self.close_connection = True

            def _fixed(self, request: ReceivedRequest) -> bool:
                answer = server._fixed.get((request.method, request.path))
                if answer is None:
                    return False
                server._record(request)
                self._send(200, answer(request.body), head_only=request.method == "HEAD")
                return True

            def do_HEAD(self) -> None:  # noqa: N802 (the stdlib's name)
                request = self._request("HEAD")
                if not self._fixed(request):
                    server._record(request)
                    self._send(200, None, head_only=True)

            def do_GET(self) -> None:  # noqa: N802
                request = self._request("GET")
                if not self._fixed(request):
                    server._record(request)
                    self._send(404, {"error": {"message": f"no route {request.path}"}})

            def do_POST(self) -> None:  # noqa: N802
                request = self._request("POST")
                if self._fixed(request):
                    return
                reply, formatter, serial = server._next_reply(request)
                if reply.delay_s and server._stopping.wait(reply.delay_s):
                    return
                payload = (
                    formatter(reply.text, request.body, serial)
                    if reply.text is not None and formatter is not None
                    else reply.body
                )
                self._send(reply.status, payload, reply.headers)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        return Handler


__all__ = ["FixedAnswer", "Reply", "SseStream", "StreamingModelServer"]
