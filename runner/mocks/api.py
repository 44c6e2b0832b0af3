"""The ``mock.api`` runtime: match a request to a route, answer it, log it."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from proctor.mock import Mock, Response
from runner.core.limits import UserCodeError
from runner.mocks.call_log import CallLog, redact_headers
from runner.mocks.handlers import call_handler

Send = Any
Receive = Any


@dataclass(frozen=True)
class MockRequest:
    """What a route's function receives: ``request.json["order_id"]``, ``request.params["id"]``."""

    method: str
    path: str
    params: dict[str, str]  # from the route's {placeholders}
    query: dict[str, Any]
    headers: dict[str, str]
    text: str
    json: Any = None
    state: dict[str, Any] = field(default_factory=dict)


def compile_route(route: str) -> tuple[str, re.Pattern[str]]:
    """``"GET /orders/{id}"`` -> ("GET", ^/orders/(?P<id>[^/]+)/?$)."""
    method, _, path = route.partition(" ")
    parts = re.split(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", path.strip())
    regex = "".join(f"(?P<{p}>[^/]+)" if i % 2 else re.escape(p) for i, p in enumerate(parts))
    return method.upper(), re.compile(f"^{regex.rstrip('/')}/?$")


def _query(raw: bytes) -> dict[str, Any]:
    parsed = parse_qs(raw.decode("latin-1"), keep_blank_values=True)
    return {k: v[0] if len(v) == 1 else v for k, v in parsed.items()}


async def read_body(receive: Receive) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def send_answer(
    send: Send, status: int, body: bytes, content_type: str, headers: Mapping[str, str]
) -> None:
    raw = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), str(v).encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def normalize_answer(value: Any) -> Response:
    """A handler's or route's answer as a Response: a Response, a dict/list (JSON), a str
    (text), an int (an empty answer with that status), or (status, body)."""
    if isinstance(value, Response):
        return value
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], int):
        inner = normalize_answer(value[1])
        return Response(status=value[0], json=inner.json, text=inner.text, headers=inner.headers)
    if value is None:
        return Response(status=204)
    if isinstance(value, bool) or not isinstance(value, int | str):
        return Response(json=value)
    if isinstance(value, int):
        return Response(status=value)
    return Response(text=value)


class ApiMock:
    """One ``mock.api`` of one trial: its routes, its state and its call log."""

    def __init__(self, mock: Mock, limit_s: float | None = None) -> None:
        self.mock = mock
        self.routes = [(compile_route(route), answer) for route, answer in mock.routes.items()]
        self.state: dict[str, Any] = {}
        self.log = CallLog(mock.name, "api")
        self.limit_s = limit_s

    def match(self, method: str, path: str) -> tuple[Any, dict[str, str]] | None:
        for (route_method, pattern), answer in self.routes:
            found = pattern.match(path)
            if found and route_method == method:
                return answer, found.groupdict()
        return None

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        started = time.time()
        method = scope["method"].upper()
        path = scope["path"]
        raw = await read_body(receive)
        text = raw.decode("utf-8", errors="replace")
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            body: Any = json.loads(text) if text.strip() else None
        except json.JSONDecodeError:
            body = text
        query = _query(scope.get("query_string", b""))
        matched = self.match(method, path)
        error = ""
        if matched is None:
            answer = Response(status=404, json={"error": f"no route {method} {path}"})
            error = "no such route"
        else:
            value, params = matched
            if callable(value):
                request = MockRequest(
                    method=method,
                    path=path,
                    params=params,
                    query=query,
                    headers=headers,
                    text=text,
                    json=body if not isinstance(body, str) else None,
                    state=self.state,
                )
                try:
                    result = await asyncio.to_thread(
                        call_handler,
                        value,
                        (request,),
                        self.state,
                        what=f"mock {self.mock.name} route {method} {path}",
                        limit_s=self.limit_s,
                    )
                    answer = normalize_answer(result)
                except UserCodeError as exc:
                    answer, error = Response(status=500, json={"error": str(exc)}), str(exc)
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    answer = Response(status=500, json={"error": error})
            else:
                answer = normalize_answer(value)
        if answer.text is not None:
            payload, content_type, logged = (
                answer.text.encode(),
                "text/plain; charset=utf-8",
                answer.text,
            )
        elif answer.json is not None or answer.status not in (204, 304):
            logged = answer.json
            payload = json.dumps(answer.json).encode() if answer.json is not None else b""
            content_type = "application/json"
        else:
            payload, content_type, logged = b"", "text/plain", None
        # Logged before the answer leaves: once the agent has it, a check sees the call.
        self.log.add(
            started=started,
            method=method,
            path=path,
            status=answer.status,
            query=query,
            headers=redact_headers(headers),
            body=body,
            response=logged,
            error=error,
        )
        await send_answer(send, answer.status, payload, content_type, answer.headers)
