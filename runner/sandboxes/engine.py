"""The Docker Engine API spoken directly: the few calls the docker sandbox makes, each one HTTP
request on the engine's socket, with no SDK and no CLI process in between.

``DOCKER_HOST`` picks the engine as the docker CLI does: ``unix:///var/run/docker.sock`` when
unset, or ``tcp://host:port``, over TLS when ``DOCKER_TLS_VERIFY`` or ``DOCKER_CERT_PATH`` is set
(``ca.pem``, ``cert.pem`` and ``key.pem`` from ``DOCKER_CERT_PATH``, else ``~/.docker``; the
engine's certificate is checked only with ``DOCKER_TLS_VERIFY``). Requests use the engine's own
API version, asked once per process and engine.

An exec's output comes back on a connection of its own, taken over by the engine once it
answers, in its multiplexed format: frames of an 8-byte header (the stream, 1 for stdout and
2 for stderr; three zero bytes; the payload's length, big-endian) followed by the payload.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import ssl
import struct
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

DEFAULT_HOST = "unix:///var/run/docker.sock"
# Bytes taken from an exec's stream per read.
READ_CHUNK = 1 << 20
FRAME_HEADER = struct.Struct(">BxxxI")
STDERR_STREAMS = (2, 3)  # 3: the engine's own error about the exec (newer API versions)


class EngineError(Exception):
    """The engine answered with an error (``status`` is its HTTP status), or could not be
    reached (``status`` 0)."""

    def __init__(self, status: int, explanation: str) -> None:
        super().__init__(explanation)
        self.status = status
        self.explanation = explanation


def _unix_socket(path: str, timeout: float | None) -> socket.socket:
    """A stream socket connected to the engine's unix socket at ``path``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    return sock


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float | None) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        self.sock = _unix_socket(self.socket_path, self.timeout)


def _tls_context() -> ssl.SSLContext | None:
    verify = bool(os.environ.get("DOCKER_TLS_VERIFY"))
    cert_path = os.environ.get("DOCKER_CERT_PATH")
    if not verify and not cert_path:
        return None
    folder = cert_path or os.path.join(os.path.expanduser("~"), ".docker")
    context = ssl.create_default_context(cafile=os.path.join(folder, "ca.pem") if verify else None)
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    if os.path.exists(cert) and os.path.exists(key):
        context.load_cert_chain(cert, key)
    return context


class Engine:
    """One Docker engine, as ``DOCKER_HOST`` names it. Each call opens its own connection, so
    an Engine is shared freely between threads."""

    def __init__(self, host: str | None = None, *, timeout: float = 60) -> None:
        self.host = host or os.environ.get("DOCKER_HOST") or DEFAULT_HOST
        self.timeout = timeout
        address = urlsplit(self.host)
        self.socket_path: str | None = None
        self.tls: ssl.SSLContext | None = None
        if address.scheme == "unix":
            self.socket_path = address.path
        elif address.scheme in ("tcp", "http", "https"):
            self.tls = _tls_context()
            if address.scheme == "https" and self.tls is None:
                self.tls = ssl.create_default_context()
            self.hostname = address.hostname or "localhost"
            self.port = address.port or (2376 if self.tls else 2375)
        else:
            raise EngineError(
                0, f"DOCKER_HOST {self.host} is not a unix:// or tcp:// address this client speaks"
            )

    def _connect(self, timeout: float | None) -> http.client.HTTPConnection:
        if self.socket_path is not None:
            return _UnixConnection(self.socket_path, timeout)
        if self.tls is not None:
            return http.client.HTTPSConnection(
                self.hostname, self.port, timeout=timeout, context=self.tls
            )
        return http.client.HTTPConnection(self.hostname, self.port, timeout=timeout)

    @property
    def api(self) -> str:
        """The path prefix of the engine's API version (``/v1.41``)."""
        return _api_prefix(self)

    def call(
        self, method: str, path: str, body: Any = None, *, timeout: float | None = None
    ) -> Any:
        """One request to ``path`` (after the version prefix); the decoded JSON answer, or None
        for an empty one. Raises EngineError for an error status or an unreachable engine."""
        return self._call(method, self.api + path, body, timeout=timeout)

    def _call(
        self, method: str, path: str, body: Any = None, *, timeout: float | None = None
    ) -> Any:
        connection = self._connect(self.timeout if timeout is None else timeout)
        try:
            payload = None if body is None else json.dumps(body).encode()
            headers = {"Host": "docker"}
            if payload is not None:
                headers["Content-Type"] = "application/json"
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            data = response.read()
            status = response.status
        except (OSError, http.client.HTTPException) as exc:
            raise EngineError(0, f"{type(exc).__name__}: {exc}") from exc
        finally:
            connection.close()
        if status >= 400:
            raise EngineError(status, _explanation(data) or f"HTTP {status}")
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError:
            return data.decode("utf-8", errors="replace")

    def raw(
        self,
        method: str,
        path: str,
        data: bytes | None = None,
        *,
        content_type: str = "application/x-tar",
        timeout: float | None = None,
    ) -> bytes:
        """One request with a raw body (a tar archive: a build context, files put into a
        container) whose raw answer is returned; EngineError as for ``call``."""
        connection = self._connect(self.timeout if timeout is None else timeout)
        try:
            headers = {"Host": "docker"}
            if data is not None:
                headers["Content-Type"] = content_type
            connection.request(method, self.api + path, body=data, headers=headers)
            response = connection.getresponse()
            answer = response.read()
            status = response.status
        except (OSError, http.client.HTTPException) as exc:
            raise EngineError(0, f"{type(exc).__name__}: {exc}") from exc
        finally:
            connection.close()
        if status >= 400:
            raise EngineError(status, _explanation(answer) or f"HTTP {status}")
        return answer

    def start_exec(self, exec_id: str) -> ExecStream:
        """Start the exec ``exec_id`` attached: its output arrives on the returned stream."""
        body = json.dumps({"Detach": False, "Tty": False}).encode()
        request = (
            f"POST {self.api}/exec/{exec_id}/start HTTP/1.1\r\n"
            "Host: docker\r\nContent-Type: application/json\r\n"
            f"Connection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        try:
            sock = self._open_socket()
        except OSError as exc:
            raise EngineError(0, f"{type(exc).__name__}: {exc}") from exc
        try:
            sock.sendall(request)
            head, rest = _read_head(sock)
            status = int(head.split(b" ", 2)[1])
            if status >= 400:
                raise EngineError(status, _explanation(_read_body(sock, head, rest)))
        except (OSError, ValueError, IndexError) as exc:
            sock.close()
            raise EngineError(0, f"the engine's answer to an exec start broke off ({exc})") from exc
        except EngineError:
            sock.close()
            raise
        return ExecStream(sock, rest)

    def _open_socket(self) -> socket.socket:
        if self.socket_path is not None:
            return _unix_socket(self.socket_path, self.timeout)
        sock = socket.create_connection((self.hostname, self.port), timeout=self.timeout)
        if self.tls is not None:
            return self.tls.wrap_socket(sock, server_hostname=self.hostname)
        return sock


# The API version prefix of each engine (by DOCKER_HOST), asked on first use.
_versions: dict[str, str] = {}


def _api_prefix(engine: Engine) -> str:
    prefix = _versions.get(engine.host)
    if prefix is None:
        answer = engine._call("GET", "/version")
        version = answer.get("ApiVersion") if isinstance(answer, dict) else None
        prefix = f"/v{version}" if version else ""
        _versions[engine.host] = prefix
    return prefix


def _explanation(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace").strip()
    try:
        message = json.loads(text).get("message")
    except (ValueError, AttributeError):
        return text
    return str(message) if message else text


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    """The status line and headers of an answer, and the bytes already read past them."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ValueError("the engine closed the connection before answering")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _read_body(sock: socket.socket, head: bytes, rest: bytes) -> bytes:
    length = None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while length is not None and len(rest) < length:
        chunk = sock.recv(4096)
        if not chunk:
            break
        rest += chunk
    return rest if length is None else rest[:length]


class ExecStream:
    """An exec's output as it comes, cut into its stdout and stderr payloads."""

    def __init__(self, sock: socket.socket, already_read: bytes) -> None:
        self.sock = sock
        self.buffer = already_read
        self.ended = False

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
        self.ended = True
        with contextlib.suppress(OSError):
            self.sock.close()
