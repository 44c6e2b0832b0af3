"""A fake model server on loopback: real HTTP, answers scripted per test.

    with FakeModelServer() as server:
        server.script("first answer", Reply(status=429, headers={"Retry-After": "0"}), "second")
        config = LLMConfig(base_url=server.url, model="fake-model", ...)

Each route (a path such as ``/v1/chat/completions``) has its own queue of replies, consumed in
order; a route whose script ran out answers 500 "script exhausted" so a test notices an extra
call. A plain string reply becomes the route's normal answer holding that text; how is the
route's business (``add_route``), so other wire APIs (OpenAI Responses, Anthropic Messages,
Gemini) are one formatter each. Anthropic's Messages route (``/v1/messages``, not streamed) is
served from the start: fakes.anthropic_messages.
"""

from __future__ import annotations

import json
import re
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from fakes.anthropic_messages import ANTHROPIC_MESSAGES, messages_body

CHAT_COMPLETIONS = "/v1/chat/completions"
EMBEDDINGS = "/v1/embeddings"
# The length of the fake embeddings: words hashed into this many buckets.
EMBEDDING_DIMENSIONS = 64


@dataclass
class Reply:
    """One scripted answer. ``text`` is formatted as the route's normal answer; otherwise
    ``body`` is sent as is (a dict or list as JSON, a string as raw text). ``trickle_s`` sends
    the body ten bytes at a time, that long apart; ``drop`` closes the connection instead of
    answering."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    text: str | None = None
    trickle_s: float = 0.0
    drop: bool = False


@dataclass
class ReceivedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lowercased
    body: Any  # the JSON body, or the raw text when it was not JSON
    raw: str
    client_port: int = 0  # which connection it came on


# A scripted reply: text, a full JSON body, a Reply, or a function of the request's JSON body
# returning any of those.
ScriptedReply = str | dict | Reply | Callable[[Any], Any]
# Turns the text of a string reply into the route's response body, given the request body.
TextFormatter = Callable[[str, Any, int], dict[str, Any]]


def chat_completion_body(text: str, request: Any, serial: int) -> dict[str, Any]:
    """An OpenAI Chat Completions response whose assistant message is ``text``."""
    model = request.get("model") if isinstance(request, dict) else None
    return {
        "id": f"chatcmpl-fake-{serial}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model or "fake-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": 11,
            "completion_tokens": len(text.split()),
            "total_tokens": 11 + len(text.split()),
        },
    }


def word_vector(text: str) -> list[float]:
    """A deterministic embedding: the text's lowercased words counted into hashed buckets, so
    the same words give similarity 1 and texts sharing no word 0."""
    vector = [0.0] * EMBEDDING_DIMENSIONS
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        vector[zlib.crc32(word.encode()) % EMBEDDING_DIMENSIONS] += 1.0
    return vector


class FakeModelServer:
    """A ThreadingHTTPServer on 127.0.0.1 and a free port; start it with ``with`` or
    ``start()``/``stop()``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._formatters: dict[str, TextFormatter] = {}
        self._scripts: dict[str, deque[ScriptedReply]] = {}
        self._serial = 0
        self.requests: list[ReceivedRequest] = []
        # Set when a client closed its connection before the whole of an answer was sent.
        self.client_hung_up = threading.Event()
        self.add_route(CHAT_COMPLETIONS, chat_completion_body)
        self.add_route(ANTHROPIC_MESSAGES, messages_body)
        # Embeddings answer without a script: each text's scripted vector (``embed_as``), else
        # its word_vector. A reply scripted for the route (an error, say) goes first.
        self.vectors: dict[str, list[float]] = {}
        self.add_route(EMBEDDINGS, chat_completion_body)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # --- set-up -------------------------------------------------------------------------------

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_port}"

    @property
    def url(self) -> str:
        """The OpenAI-style base URL, ending in /v1."""
        return f"{self.root_url}/v1"

    def add_route(self, path: str, format_text: TextFormatter) -> None:
        """Serve ``path`` (POST), turning string replies into bodies with ``format_text``."""
        with self._lock:
            self._formatters[path] = format_text
            self._scripts.setdefault(path, deque())

    def script(self, *replies: ScriptedReply, route: str = CHAT_COMPLETIONS) -> None:
        """Queue replies for ``route``, after any still queued."""
        with self._lock:
            if route not in self._formatters:
                raise KeyError(f"the fake server has no route {route}; add it with add_route()")
            self._scripts[route].extend(replies)

    def embed_as(self, text: str, vector: list[float]) -> None:
        """Answer embedding requests for ``text`` with ``vector``."""
        with self._lock:
            self.vectors[text] = list(vector)

    def embeddings_body(self, request: Any) -> dict[str, Any]:
        """OpenAI's embeddings response for the request's ``input`` (a text or a list)."""
        texts = request.get("input") if isinstance(request, dict) else None
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        with self._lock:
            vectors = [self.vectors.get(str(t)) or word_vector(str(t)) for t in texts]
        return {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)
            ],
            "model": request.get("model") if isinstance(request, dict) else "fake-embedding",
            "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
        }

    def unused_replies(self, route: str = CHAT_COMPLETIONS) -> int:
        with self._lock:
            return len(self._scripts.get(route, ()))

    def requests_to(self, route: str = CHAT_COMPLETIONS) -> list[ReceivedRequest]:
        with self._lock:
            return [request for request in self.requests if request.path == route]

    def start(self) -> FakeModelServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes replies still sleeping out their delay
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- serving ------------------------------------------------------------------------------

    def _next_reply(self, request: ReceivedRequest) -> tuple[Reply, TextFormatter | None, int]:
        with self._lock:
            self.requests.append(request)
            self._serial += 1
            serial = self._serial
            formatter = self._formatters.get(request.path)
            if formatter is None:
                return (
                    Reply(status=404, body={"error": {"message": f"no route {request.path}"}}),
                    None,
                    serial,
                )
            queue = self._scripts[request.path]
            scripted = queue.popleft() if queue else None
        if scripted is None and request.path == EMBEDDINGS:
            return Reply(body=self.embeddings_body(request.body)), formatter, serial
        if scripted is None:
            return (
                Reply(status=500, body={"error": {"message": "script exhausted"}}),
                formatter,
                serial,
            )
        while callable(scripted) and not isinstance(scripted, Reply):
            scripted = scripted(request.body)
        if isinstance(scripted, str):
            return Reply(text=scripted), formatter, serial
        if isinstance(scripted, dict):
            return Reply(body=scripted), formatter, serial
        if isinstance(scripted, Reply):
            return scripted, formatter, serial
        raise TypeError(
            f"a scripted reply is a str, dict, Reply or callable, not {type(scripted).__name__}"
        )

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # As real servers do: without it, an answer's body waits behind its headers for the
            # client's delayed ACK on a kept-alive connection (40 ms a call).
            disable_nagle_algorithm = True

            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8", errors="replace")
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw
                request = ReceivedRequest(
                    method="POST",
                    path=self.path.split("?", 1)[0],
                    headers={name.lower(): value for name, value in self.headers.items()},
                    body=body,
                    raw=raw,
                    client_port=self.client_address[1],
                )
                reply, formatter, serial = server._next_reply(request)
                if reply.delay_s and server._stopping.wait(reply.delay_s):
                    return
                if reply.drop:
                    self.close_connection = True
                    return
                if reply.text is not None and formatter is not None:
                    payload: Any = formatter(reply.text, request.body, serial)
                else:
                    payload = reply.body
                if isinstance(payload, str):
                    data, content_type = payload.encode(), "text/plain; charset=utf-8"
                elif payload is None:
                    data, content_type = b"", "text/plain; charset=utf-8"
                else:
                    data, content_type = json.dumps(payload).encode(), "application/json"
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    step = 10 if reply.trickle_s else max(len(data), 1)
                    for start in range(0, len(data), step):
                        if start and server._stopping.wait(reply.trickle_s):
                            return
                        self.wfile.write(data[start : start + step])
                except (BrokenPipeError, ConnectionResetError):
                    # The client gave up waiting (a timeout test): nothing to tell it.
                    server.client_hung_up.set()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # keep test output clean

        return Handler


@pytest.fixture(name="fake_model_server")
def fake_model_server_fixture() -> Iterator[FakeModelServer]:
    """A started FakeModelServer for one test, as the ``fake_model_server`` fixture.

    Import this function into a test module or conftest (``from fakes.openai_server import
    fake_model_server_fixture  # noqa: F401``) and ask for ``fake_model_server``; it carries
    another name so the import does not clash with the tests' parameter."""
    with FakeModelServer() as server:
        yield server
