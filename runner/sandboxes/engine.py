"""The Docker engine through the ``docker`` SDK: the process's client, the engine's errors as one
line, and an exec's output read as it comes.

``docker.from_env()`` picks the engine as the docker CLI does: ``DOCKER_HOST`` (a unix socket,
``unix:///var/run/docker.sock`` when unset, or ``tcp://host:port``, over TLS when
``DOCKER_TLS_VERIFY`` or ``DOCKER_CERT_PATH`` is set), and asks the engine's API version once.
The SDK, with requests and urllib3 under it, is imported when the first client is made, not with
the sandboxes: its ~0.1 s is paid by a process that makes a docker sandbox, never by
``proctor eval --help`` or a local or bwrap trial.

One client per process, made on first use and shared by its threads (each request takes a
connection of its own from the client's pool). A forked child (``proctor eval``'s workers)
makes its own on first use: the parent's connections stay the parent's, as two processes
writing requests on one socket would read each other's answers.

An exec's output comes back on a connection of its own, taken over by the engine once it
answers (``exec_start(socket=True)``), in its multiplexed format: frames of an 8-byte header
(the stream, 1 for stdout and 2 for stderr; three zero bytes; the payload's length, big-endian)
followed by the payload.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from docker import DockerClient

# Seconds to wait for the engine's answer to a call (create, start, inspect, remove).
TIMEOUT_S = 60
# The connections the client keeps per address (the SDK pools them by URL, 25 pools at most):
# more than the trials a process runs at once (one per CPU unless told) plus its remover thread,
# as urllib3 closes a connection handed back past it with a warning on its log.
POOL_SIZE = 64
# Bytes taken from an exec's stream per read.
READ_CHUNK = 1 << 20
FRAME_HEADER = struct.Struct(">BxxxI")
STDERR_STREAMS = (2, 3)  # 3: the engine's own error about the exec (newer API versions)


class EngineError(Exception):
    """The engine answered with an error (``status`` is its HTTP status), or could not be
    reached or did not answer in time (``status`` 0); the explanation is one line."""

    def __init__(self, status: int, explanation: str) -> None:
        explanation = " ".join(explanation.split())
        super().__init__(explanation)
        self.status = status
        self.explanation = explanation


@contextlib.contextmanager
def engine_errors() -> Iterator[None]:
    """The SDK's errors in the block, and those of requests under it, as EngineError."""
    from docker.errors import APIError, DockerException
    from requests.exceptions import RequestException

    try:
        yield
    # An answer with an error status; first, as APIError is a kind of RequestException.
    except APIError as exc:
        raise EngineError(exc.status_code or 0, str(exc.explanation or exc)) from exc
    except (DockerException, RequestException) as exc:
        raise EngineError(0, str(exc)) from exc


def connect(timeout: float = TIMEOUT_S) -> DockerClient:
    """A new client of the engine ``DOCKER_HOST`` names (one request: its API version).
    EngineError when it cannot be reached."""
    import docker  # the SDK and requests, ~0.1 s: only once a docker sandbox is wanted

    with engine_errors():
        return docker.from_env(timeout=timeout, max_pool_size=POOL_SIZE)


_lock = threading.Lock()
_client: DockerClient | None = None


def client() -> DockerClient:
    """This process's client, made on first use (see the module's docstring)."""
    global _client
    with _lock:
        if _client is None:
            _client = connect()
        return _client


def _forget_in_child() -> None:
    global _client, _lock
    _client = None
    _lock = threading.Lock()  # the parent's may have been held at the fork


os.register_at_fork(after_in_child=_forget_in_child)


def unix_socket_path(engine: DockerClient) -> str | None:
    """The path of the unix socket ``engine`` talks to, or None for an engine over TCP (the
    SDK keeps it on the adapter it mounted for the socket)."""
    path = getattr(getattr(engine.api, "_custom_adapter", None), "socket_path", None)
    return path if isinstance(path, str) else None


def start_exec(engine: DockerClient, exec_id: str) -> ExecStream:
    """Start the exec ``exec_id`` attached: its output arrives on the returned stream."""
    with engine_errors():
        raw = engine.api.exec_start(exec_id, socket=True)
    return ExecStream(raw)


def _read_ahead(raw: Any, sock: socket.socket) -> bytes:
    """The bytes the HTTP client read past the engine's answer into its buffer (the first frames,
    when they came with it), which a read of the socket would miss; taken without waiting.
    The buffer is http.client's file on the socket, under the response the SDK keeps on it."""
    try:
        reader = raw._response.raw._fp.fp
    except AttributeError:
        return b""
    sock.settimeout(0)
    try:
        # What the buffer holds, or else what one read that does not wait gets.
        return bytes(reader.peek())
    except (OSError, ValueError):  # nothing there yet (over TLS a want-read error), or closed
        return b""


class ExecStream:
    """An exec's output as it comes, cut into its stdout and stderr payloads."""

    def __init__(self, raw: Any) -> None:
        # The SDK gives the socket's file over a unix socket or plain TCP, the socket over TLS.
        self.raw = raw
        sock = raw._sock if isinstance(raw, socket.SocketIO) else raw  # type: ignore[attr-defined]
        self.sock: socket.socket = sock
        self.buffer = _read_ahead(raw, self.sock)
        self.ended = False
        self._closed = False

    def pump(
        self, stdout: Callable[[bytes], None], stderr: Callable[[bytes], None], wait_s: float
    ) -> bool:
        """Hand over what arrives within ``wait_s`` seconds; True once the stream has ended
        (the exec's process and every process holding its output are gone, or the engine closed
        it), and then at once."""
        deadline = time.monotonic() + wait_s
        if self.buffer:
            self._split(stdout, stderr)
        while not self.ended:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(READ_CHUNK)
            except TimeoutError:
                return False
            except OSError:
                chunk = b""
            if not chunk:
                self.close()
                return True
            self.buffer += chunk
            self._split(stdout, stderr)
        return True

    def _split(self, stdout: Callable[[bytes], None], stderr: Callable[[bytes], None]) -> None:
        buffer, at, size = self.buffer, 0, len(self.buffer)
        while size - at >= FRAME_HEADER.size:
            stream, length = FRAME_HEADER.unpack_from(buffer, at)
            end = at + FRAME_HEADER.size + length
            if end > size:
                break
            payload = buffer[at + FRAME_HEADER.size : end]
            (stderr if stream in STDERR_STREAMS else stdout)(payload)
            at = end
        self.buffer = buffer[at:]

    def close(self) -> None:
        """End the connection (the engine sees it closed whatever else still refers to the
        socket: the SDK's response and its file), then let go of it."""
        self.ended = True
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        for closable in (self.sock, self.raw, getattr(self.raw, "_response", None)):
            with contextlib.suppress(Exception):
                if closable is not None:
                    closable.close()
