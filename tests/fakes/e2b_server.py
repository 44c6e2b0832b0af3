"""A fake E2B on loopback, speaking the wire protocol of E2B's official Python SDK.

    with FakeE2B() as e2b:
        monkeypatch.setenv(...) for name, value in e2b.sdk_env().items()
        # the SDK now creates, drives and kills sandboxes here

Two faces on one port, as the SDK reaches them:

- the control API (``E2B_API_URL``): ``POST /v2/sandboxes`` (and ``/sandboxes``),
  ``GET /sandboxes`` and ``/v2/sandboxes``, ``DELETE /sandboxes/{id}``,
  ``POST /sandboxes/{id}/timeout``; the key in ``X-API-Key`` is checked, a template must be
  one the test named, and a sandbox past its timeout is killed as E2B would;
- each sandbox's envd (``E2B_SANDBOX_URL``, the sandbox named by the ``E2b-Sandbox-Id`` header
  the SDK sends): the Connect-RPC ``process.Process`` service (Start streaming, SendSignal,
  List) served by connectrpc's own ASGI application with the SDK's generated protobuf classes
  and its JSON codec, part of the ``filesystem.Filesystem`` service, ``/files`` upload
  (multipart or octet-stream) and download, ``/health``.

A sandbox is a folder; its processes run on this machine with that folder's ``home/user`` as
HOME, each in its own session so a kill takes its children too. ``refuse_creates`` scripts
the provider's refusals (quota: 429; auth: 401), and ``stop`` refuses connections like a
network gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from e2b.envd.client_shared import ENVD_JSON_CODEC
from e2b.envd.filesystem import filesystem_connect, filesystem_pb
from e2b.envd.process import process_connect, process_pb
from protobuf import Oneof
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

API_KEY = "e2b_fake_key_for_tests"
# What envd version the fake reports: new enough for the SDK's default user and octet-stream
# uploads, so it takes the paths it takes against E2B today.
ENVD_VERSION = "0.5.7"


@dataclass
class FakeSandbox:
    sandbox_id: str
    template: str
    folder: Path
    ends_at: float
    metadata: dict[str, str]
    processes: dict[int, asyncio.subprocess.Process] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.folder / "home" / "user"


class FakeE2B:
    def __init__(self, templates: tuple[str, ...] = ("base",)) -> None:
        self.templates = set(templates)
        self.root = Path(tempfile.mkdtemp(prefix="fake-e2b-"))
        self.sandboxes: dict[str, FakeSandbox] = {}
        self.killed: list[str] = []
        self.created: list[dict[str, Any]] = []
        self._refusal: tuple[int, str] | None = None
        self._lock = threading.Lock()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    # --- what a test uses ----------------------------------------------------------------

    def sdk_env(self) -> dict[str, str]:
        """The SDK's own settings that point it here."""
        return {
            "E2B_API_KEY": API_KEY,
            "E2B_API_URL": self.url,
            "E2B_SANDBOX_URL": self.url,
            # uvicorn speaks HTTP/1.1; the SDK's default is HTTP/2.
            "E2B_HTTP_VERSION": "1.1",
        }

    def refuse_creates(self, status: int, message: str) -> None:
        """Answer every sandbox creation from now on with ``status`` (the SDK retries a 429
        on its own, so a single refusal would never reach the caller)."""
        self._refusal = (status, message)

    def running(self) -> list[str]:
        with self._lock:
            return sorted(self.sandboxes)

    def __enter__(self) -> FakeE2B:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def start(self) -> None:
        config = uvicorn.Config(
            self._app(), host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the fake E2B server did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        for sandbox_id in self.running():
            self._kill(sandbox_id)
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)

    # --- the control API -------------------------------------------------------------------

    def _app(self) -> Starlette:
        process_app = process_connect.ProcessASGIApplication(
            _ProcessService(self), codecs=[ENVD_JSON_CODEC]
        )
        filesystem_app = filesystem_connect.FilesystemASGIApplication(
            _FilesystemService(self), codecs=[ENVD_JSON_CODEC]
        )
        return Starlette(
            routes=[
                Route("/v2/sandboxes", self._create, methods=["POST"]),
                Route("/sandboxes", self._create, methods=["POST"]),
                Route("/sandboxes", self._list, methods=["GET"]),
                Route("/v2/sandboxes", self._list, methods=["GET"]),
                Route("/sandboxes/{sandbox_id}", self._delete, methods=["DELETE"]),
                Route("/sandboxes/{sandbox_id}/timeout", self._set_timeout, methods=["POST"]),
                Route("/files", self._files, methods=["GET", "POST"]),
                Route("/health", lambda _r: Response(status_code=204), methods=["GET"]),
                Mount("/process.Process", app=process_app),
                Mount("/filesystem.Filesystem", app=filesystem_app),
            ]
        )

    def _authorized(self, request: Request) -> JSONResponse | None:
        if request.headers.get("x-api-key") != API_KEY:
            return JSONResponse({"code": 401, "message": "Invalid API key"}, status_code=401)
        return None

    async def _create(self, request: Request) -> Response:
        if (refused := self._authorized(request)) is not None:
            return refused
        self._expire()
        if self._refusal is not None:
            status, message = self._refusal
            return JSONResponse({"code": status, "message": message}, status_code=status)
        body = await request.json()
        template = body.get("templateID", "")
        if template not in self.templates:
            return JSONResponse(
                {"code": 404, "message": f"template '{template}' not found"}, status_code=404
            )
        sandbox_id = "i" + secrets.token_hex(8)
        folder = self.root / sandbox_id
        sandbox = FakeSandbox(
            sandbox_id=sandbox_id,
            template=template,
            folder=folder,
            ends_at=time.time() + float(body.get("timeout") or 300),
            metadata=body.get("metadata") or {},
        )
        sandbox.home.mkdir(parents=True)
        (folder / "tmp").mkdir()
        with self._lock:
            self.sandboxes[sandbox_id] = sandbox
            self.created.append(body)
        return JSONResponse(
            {
                "templateID": template,
                "sandboxID": sandbox_id,
                "clientID": "fake",
                "envdVersion": ENVD_VERSION,
            },
            status_code=201,
        )

    async def _list(self, request: Request) -> Response:
        if (refused := self._authorized(request)) is not None:
            return refused
        self._expire()
        with self._lock:
            listed = list(self.sandboxes.values())
        return JSONResponse(
            [
                {
                    "templateID": s.template,
                    "sandboxID": s.sandbox_id,
                    "clientID": "fake",
                    "startedAt": "2026-01-01T00:00:00Z",
                    "endAt": "2026-01-01T01:00:00Z",
                    "cpuCount": 2,
                    "memoryMB": 512,
                    "diskSizeMB": 1024,
                    "envdVersion": ENVD_VERSION,
                    "state": "running",
                    "metadata": s.metadata,
                }
                for s in listed
            ]
        )

    async def _delete(self, request: Request) -> Response:
        if (refused := self._authorized(request)) is not None:
            return refused
        sandbox_id = request.path_params["sandbox_id"]
        if not self._kill(sandbox_id):
            return JSONResponse(
                {"code": 404, "message": f"sandbox {sandbox_id} not found"}, status_code=404
            )
        return Response(status_code=204)

    async def _set_timeout(self, request: Request) -> Response:
        if (refused := self._authorized(request)) is not None:
            return refused
        sandbox = self.sandboxes.get(request.path_params["sandbox_id"])
        if sandbox is None:
            return JSONResponse({"code": 404, "message": "sandbox not found"}, status_code=404)
        body = await request.json()
        sandbox.ends_at = time.time() + float(body["timeout"])
        return Response(status_code=204)

    def _expire(self) -> None:
        """Kill the sandboxes whose timeout passed, as E2B does on its own."""
        now = time.time()
        for sandbox in list(self.sandboxes.values()):
            if sandbox.ends_at <= now:
                self._kill(sandbox.sandbox_id)

    def _kill(self, sandbox_id: str) -> bool:
        with self._lock:
            sandbox = self.sandboxes.pop(sandbox_id, None)
            if sandbox is None:
                return False
            self.killed.append(sandbox_id)
        for process in sandbox.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        shutil.rmtree(sandbox.folder, ignore_errors=True)
        return True

    # --- envd ---------------------------------------------------------------------------

    def sandbox_of(self, headers: Any) -> FakeSandbox:
        self._expire()
        sandbox = self.sandboxes.get(headers.get("e2b-sandbox-id", ""))
        if sandbox is None:
            raise ConnectError(Code.NOT_FOUND, "The sandbox was not found")
        return sandbox

    async def _files(self, request: Request) -> Response:
        try:
            sandbox = self.sandbox_of(request.headers)
        except ConnectError:
            return JSONResponse({"code": 502, "message": "sandbox not found"}, status_code=502)
        path = request.query_params.get("path", "")
        if request.method == "GET":
            target = self.host_path(sandbox, path)
            if not target.is_file():
                return JSONResponse(
                    {"code": 404, "message": f"path '{path}' does not exist"}, status_code=404
                )
            return Response(target.read_bytes(), media_type="application/octet-stream")
        written = []
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            form = await request.form()
            for _name, upload in form.multi_items():
                name = path or getattr(upload, "filename", "")
                data = await upload.read() if hasattr(upload, "read") else str(upload).encode()
                written.append(self._write(sandbox, name, data))
        else:
            written.append(self._write(sandbox, path, await request.body()))
        return JSONResponse(written)

    def _write(self, sandbox: FakeSandbox, path: str, data: bytes) -> dict[str, str]:
        target = self.host_path(sandbox, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return {"name": target.name, "type": "file", "path": path}

    def host_path(self, sandbox: FakeSandbox, path: str) -> Path:
        """Where ``path`` of the sandbox is on this machine: a relative path is in the user's
        home; an absolute one is the host's own, as its processes run on the host and see it
        so (a sandbox's folder holds its HOME, where Proctor keeps everything)."""
        return Path(path) if path.startswith("/") else sandbox.home / path


class _ProcessService(process_connect.Process):
    def __init__(self, fake: FakeE2B) -> None:
        self.fake = fake

    async def start(
        self, request: process_pb.StartRequest, ctx: Any
    ) -> AsyncIterator[process_pb.StartResponse]:
        sandbox = self.fake.sandbox_of(ctx.request_headers)
        config = request.process
        env = {
            "HOME": str(sandbox.home),
            "USER": "user",
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "TMPDIR": str(sandbox.folder / "tmp"),
            **dict(config.envs or {}),
        }
        args = list(config.args or [])
        # A login shell would read the host's profile; the template's is what E2B reads.
        if config.cmd == "/bin/bash" and args[:1] == ["-l"]:
            args = args[1:]
        try:
            process = await asyncio.create_subprocess_exec(
                config.cmd,
                *args,
                cwd=config.cwd or str(sandbox.home),
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise ConnectError(Code.INVALID_ARGUMENT, f"could not start: {exc}") from None
        sandbox.processes[process.pid] = process
        queue: asyncio.Queue[tuple[str, bytes] | None] = asyncio.Queue()

        async def pump(name: str, stream: asyncio.StreamReader) -> None:
            while chunk := await stream.read(65536):
                await queue.put((name, chunk))
            await queue.put(None)

        assert process.stdout is not None and process.stderr is not None
        pumps = [
            asyncio.create_task(pump("stdout", process.stdout)),
            asyncio.create_task(pump("stderr", process.stderr)),
        ]
        try:
            yield _event(Oneof("start", process_pb.ProcessEvent.StartEvent(pid=process.pid)))
            open_streams = 2
            while open_streams:
                item = await queue.get()
                if item is None:
                    open_streams -= 1
                    continue
                name, chunk = item
                data = process_pb.ProcessEvent.DataEvent(output=Oneof(name, chunk))  # type: ignore[arg-type]
                yield _event(Oneof("data", data))
            code = await process.wait()
            end = process_pb.ProcessEvent.EndEvent(
                exit_code=code if code >= 0 else -1,
                exited=code >= 0,
                status=f"exit status {code}" if code >= 0 else f"signal: {-code}",
            )
            yield _event(Oneof("end", end))
        finally:
            for task in pumps:
                task.cancel()
            sandbox.processes.pop(process.pid, None)
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)

    async def send_signal(
        self, request: process_pb.SendSignalRequest, ctx: Any
    ) -> process_pb.SendSignalResponse:
        sandbox = self.fake.sandbox_of(ctx.request_headers)
        selector = request.process.selector if request.process else None
        pid = selector.value if selector is not None and selector.field == "pid" else None
        if pid not in sandbox.processes:
            raise ConnectError(Code.NOT_FOUND, f"process with pid {pid} not found")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(pid), signal.SIGKILL)
        return process_pb.SendSignalResponse()

    async def list(self, request: process_pb.ListRequest, ctx: Any) -> process_pb.ListResponse:
        sandbox = self.fake.sandbox_of(ctx.request_headers)
        return process_pb.ListResponse(
            processes=[process_pb.ProcessInfo(pid=pid) for pid in sandbox.processes]
        )


def _event(event: Any) -> process_pb.StartResponse:
    return process_pb.StartResponse(event=process_pb.ProcessEvent(event=event))


class _FilesystemService(filesystem_connect.Filesystem):
    """The calls of ``sandbox.files`` that go through Connect: stat, make_dir, remove."""

    def __init__(self, fake: FakeE2B) -> None:
        self.fake = fake

    def _path(self, ctx: Any, path: str) -> Path:
        return self.fake.host_path(self.fake.sandbox_of(ctx.request_headers), path)

    async def stat(self, request: filesystem_pb.StatRequest, ctx: Any) -> Any:
        target = self._path(ctx, request.path)
        if not target.exists():
            raise ConnectError(Code.NOT_FOUND, f"path '{request.path}' does not exist")
        return filesystem_pb.StatResponse(entry=_entry(target, request.path))

    async def make_dir(self, request: filesystem_pb.MakeDirRequest, ctx: Any) -> Any:
        target = self._path(ctx, request.path)
        if target.exists():
            raise ConnectError(Code.ALREADY_EXISTS, f"path '{request.path}' already exists")
        target.mkdir(parents=True)
        return filesystem_pb.MakeDirResponse(entry=_entry(target, request.path))

    async def remove(self, request: filesystem_pb.RemoveRequest, ctx: Any) -> Any:
        target = self._path(ctx, request.path)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        else:
            raise ConnectError(Code.NOT_FOUND, f"path '{request.path}' does not exist")
        return filesystem_pb.RemoveResponse()


def _entry(target: Path, path: str) -> Any:
    kind = filesystem_pb.FileType.DIRECTORY if target.is_dir() else filesystem_pb.FileType.FILE
    return filesystem_pb.EntryInfo(name=target.name, type=kind, path=path)
