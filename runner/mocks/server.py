"""The trial's mock server: one uvicorn server in a thread of this process, listening for each
mock on a loopback TCP port (the agent's URL where the sandbox shares the host's network) and
on a unix socket in the trial's mock folder (what the sandbox's bridge forwards to). A request
goes to the mock that owns the address it arrived on."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

from runner.mocks.api import send_answer
from runner.sandboxes.base import SandboxError

START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 5.0


class MockServerError(SandboxError):
    """The mock server could not start: the trial is errored (infrastructure)."""


class Listening:
    """One mock's two addresses."""

    def __init__(self, name: str, folder: Path) -> None:
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.port: int = self.tcp.getsockname()[1]
        self.socket_path = str(folder / f"{name}.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.socket_path)
        for sock in (self.tcp, self.unix):
            sock.listen(128)
            sock.setblocking(False)

    @property
    def sockets(self) -> list[socket.socket]:
        return [self.tcp, self.unix]


class MockServer:
    """Serves ``apps`` (mock name -> (ASGI app, listening addresses)) until ``stop``.

    ``lifespans`` are async context managers entered while the server runs (the MCP session
    managers' task groups)."""

    def __init__(self, apps: dict[str, tuple[Any, Listening]], lifespans: list[Any]) -> None:
        self.by_address: dict[Any, Any] = {}
        for app, listening in apps.values():
            self.by_address[("127.0.0.1", listening.port)] = app
            self.by_address[listening.socket_path] = app
        self.sockets = [sock for _, listening in apps.values() for sock in listening.sockets]
        self.lifespans = lifespans
        config = uvicorn.Config(
            self.app,
            lifespan="on",
            interface="asgi3",
            proxy_headers=False,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=1,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._serve, name="proctor-mocks", daemon=True)
        self.failure: BaseException | None = None

    def _serve(self) -> None:
        try:
            asyncio.run(self.server.serve(sockets=self.sockets))
        except BaseException as exc:  # reported by start(); the thread just ends
            self.failure = exc

    def start(self) -> None:
        self.thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                why = f" ({self.failure})" if self.failure else ""
                raise MockServerError(f"the trial's mock server did not start{why}")
            time.sleep(0.005)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(STOP_TIMEOUT_S)
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.close()

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        server = scope.get("server") or ("", None)
        key = server[0] if server[1] is None else (server[0], server[1])
        target = self.by_address.get(key) or self.by_address.get(tuple(server))
        if target is None:
            await send_answer(send, 502, b"no mock at this address", "text/plain", {})
            return
        await target(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        async with contextlib.AsyncExitStack() as stack:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    for lifespan in self.lifespans:
                        await stack.enter_async_context(lifespan)
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            message = await receive()
            if message["type"] == "lifespan.shutdown":
                await stack.aclose()
                await send({"type": "lifespan.shutdown.complete"})
