"""A trial's mocks from start to finish: start them in the sandbox's mock folder before the
agent, hand their call logs to grading, record the logs, stop them when the trial ends."""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.mock import Mock
from runner.core.mock_calls import MockCall, MockLog
from runner.core.reporting import RedactingRecorder, TrialRecorder
from runner.sandboxes.mock_access import McpEndpoint, MockAccess

if TYPE_CHECKING:
    from runner.mocks.otlp_receiver import OtlpReceiver
    from runner.mocks.server import Listening, MockServer

HERE = Path(__file__).resolve().parent
# The file the command harness's agent reads its MCP servers from (PROCTOR_MCP_CONFIG).
MCP_CONFIG = "mcp.json"
# The sandbox's /etc/hosts when a mock has a host name (the docker sandbox creates it with the
# container's own lines; bwrap's starts from the machine's).
HOSTS_FILE = "hosts"
SYSTEM_HOSTS = Path("/etc/hosts")
# The receiver's socket in the mock folder: a mock's name starts with a letter, so never this.
RECEIVER_NAME = "_otlp"


class TrialMocks:
    """The running mocks of one trial. ``access`` is what its sandbox adds to each process."""

    def __init__(
        self,
        runtimes: dict[str, Any],
        server: MockServer,
        access: MockAccess,
        receiver: OtlpReceiver | None = None,
    ) -> None:
        self.runtimes = runtimes
        self.server = server
        self.access = access
        # The agent's own OpenTelemetry, when its harness points the CLI here.
        self.receiver = receiver
        self._stopped = False

    def logs(self) -> dict[str, MockLog]:
        """Each mock's calls so far, by name (what checks read as ``ctx.mocks``)."""
        return {name: runtime.log.snapshot() for name, runtime in self.runtimes.items()}

    def stream_to(self, recorder: TrialRecorder) -> None:
        """Hand each call, as it is logged, to the recorder's ``mock_call`` (redacted like
        everything the trial records), so the trial page shows it while the trial runs. A
        recorder without one (in memory) gets the calls at the end only."""
        inner = recorder.inner if isinstance(recorder, RedactingRecorder) else recorder
        sink = getattr(inner, "mock_call", None)
        if sink is None:
            return

        def send(call: MockCall) -> None:
            record = call.to_json()
            if isinstance(recorder, RedactingRecorder):
                record = recorder.redactor.redact_obj(record)
            # Showing a call early is a nicety: the end records the whole log anyway.
            with contextlib.suppress(Exception):
                sink(record)

        for runtime in self.runtimes.values():
            runtime.log.listener = send

    def record(self, recorder: TrialRecorder) -> None:
        """Each mock's calls as ``mocks/<name>.jsonl`` (the database recorder keeps them as rows
        too), and one line per mock in the trial's log."""
        for runtime in self.runtimes.values():
            runtime.log.listener = None  # what follows is the whole log
        for name, log in self.logs().items():
            lines = [json.dumps(call.to_json(), ensure_ascii=False, default=str) for call in log]
            recorder.artifact(f"mocks/{name}.jsonl", "".join(line + "\n" for line in lines))
            recorder.log(f"mock {name} ({log.kind}): {len(log)} call(s)")
        if self.receiver is not None:
            record_telemetry(self.receiver, recorder)

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self.server.stop()


def _write_executable(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _shim(name: str, url: str) -> str:
    body = (HERE / "cli_shim.py").read_text(encoding="utf-8")
    body = body.replace('"{name}"', json.dumps(name)).replace('"{url}"', json.dumps(url))
    return "#!/usr/bin/env python3\n" + body


def _write_hosts(path: Path, names: Sequence[str]) -> str:
    """The sandbox's /etc/hosts: its own lines (the file the docker sandbox mounted, else the
    machine's) and each name on 127.0.0.1, where the mock (or the bridge) listens. Appended in
    place: a file bind-mounted into a running container keeps its inode."""
    if not path.exists():
        try:
            path.write_text(SYSTEM_HOSTS.read_text(encoding="utf-8"), encoding="utf-8")
        except OSError:
            path.write_text("127.0.0.1\tlocalhost\n::1\tlocalhost\n", encoding="utf-8")
    existing = path.read_text(encoding="utf-8")
    with path.open("a", encoding="utf-8") as hosts:
        if existing and not existing.endswith("\n"):
            hosts.write("\n")
        hosts.write("# the trial's mocks (proctor)\n")
        hosts.write("".join(f"127.0.0.1\t{name}\n" for name in names))
    path.chmod(0o644)
    return str(path)


def start_mocks(
    mocks: Sequence[Mock],
    sandbox: Any,
    *,
    limit_s: float | None = None,
    recorder: TrialRecorder | None = None,
    otlp_receiver: bool = False,
) -> TrialMocks | None:
    """Start ``mocks`` for the trial in ``sandbox`` and attach them to it (``sandbox.mocks``);
    None when the case has none and no receiver is asked for. Raises MockServerError when the
    server cannot start. ``limit_s`` bounds each handler call (default: the worker's tool
    limit); ``recorder`` gets each call as it happens (``TrialMocks.stream_to``);
    ``otlp_receiver`` adds the trial's OTLP/HTTP receiver (its URL: ``access.otlp_url``),
    reached like a mock from every sandbox."""
    if not mocks and not otlp_receiver:
        return None
    # Imported here: the MCP SDK alone takes seconds to import, and most trials have no mocks.
    from runner.mocks.api import ApiMock
    from runner.mocks.cli import CliMock
    from runner.mocks.otlp_receiver import OtlpReceiver
    from runner.mocks.server import Listening, MockServer

    folder = Path(sandbox.root) / "mocks"
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    runtimes: dict[str, Any] = {}
    apps: dict[str, tuple[Any, Listening]] = {}
    lifespans = []
    env: dict[str, str] = {}
    endpoints = []
    hosts: list[str] = []
    for item in mocks:
        listening = Listening(item.name, folder)
        # The sandbox's loopback: the host's own, or the bridge's (network off).
        base = f"http://127.0.0.1:{listening.port}"
        if item.host and item.kind != "cli":
            hosts.append(item.host)
            base = f"http://{item.host}:{listening.port}"
        runtime: Any
        if item.kind == "api":
            runtime = ApiMock(item, limit_s)
            env[item.env_var] = base
        elif item.kind == "cli":
            runtime = CliMock(item, limit_s)
            _write_executable(bin_dir / item.name, _shim(item.name, base + "/"))  # 127.0.0.1
        else:
            # The MCP SDK, imported only by a trial with an MCP mock (seconds to import).
            from runner.mocks.mcp_tools import MCP_PATH, McpMock

            runtime = McpMock(item, limit_s)
            lifespans.append(runtime.running())
            url = base + MCP_PATH
            env[item.env_var] = url
            endpoints.append(McpEndpoint(item.name, url, (str(folder / "mcp_stdio.py"), url)))
        runtimes[item.name] = runtime
        apps[item.name] = (runtime, listening)
    receiver = None
    otlp_url = None
    if otlp_receiver:
        receiver = OtlpReceiver()
        listening = Listening(RECEIVER_NAME, folder)
        apps[RECEIVER_NAME] = (receiver, listening)
        otlp_url = f"http://127.0.0.1:{listening.port}"
    for script in ("netbridge.py", "mcp_stdio.py"):
        (folder / script).write_text((HERE / script).read_text(encoding="utf-8"), encoding="utf-8")
    if endpoints:
        config = {
            "mcpServers": {e.name: {"type": "http", "url": e.url} for e in endpoints},
        }
        (folder / MCP_CONFIG).write_text(json.dumps(config, indent=2), encoding="utf-8")
        env["PROCTOR_MCP_CONFIG"] = str(folder / MCP_CONFIG)
    hosts_file = _write_hosts(folder / HOSTS_FILE, hosts) if hosts else None
    server = MockServer(apps, lifespans)
    server.start()
    access = MockAccess(
        folder=str(folder),
        bin_dir=str(bin_dir),
        env=env,
        routes=tuple((listening.port, listening.socket_path) for _, listening in apps.values()),
        bridge=str(folder / "netbridge.py"),
        mcp=tuple(endpoints),
        hosts=tuple(hosts),
        hosts_file=hosts_file,
        otlp_url=otlp_url,
    )
    trial_mocks = TrialMocks(runtimes, server, access, receiver)
    if recorder is not None:
        trial_mocks.stream_to(recorder)
    sandbox.mocks = access
    sandbox.mock_runtime = trial_mocks
    os.chmod(folder, 0o755)
    return trial_mocks


def stop_mocks(sandbox: Any, recorder: TrialRecorder | None = None) -> None:
    """Record the calls of the sandbox's mocks (when ``recorder`` is given) and stop them; a
    sandbox without mocks is left as it is. Safe to call twice."""
    running: TrialMocks | None = getattr(sandbox, "mock_runtime", None)
    if running is None:
        return
    sandbox.mock_runtime = None
    try:
        if recorder is not None:
            running.record(recorder)
    except Exception as exc:  # the trial is ending: its outcome must still be reported
        assert recorder is not None  # only recording can fail
        recorder.log(f"the mocks' calls could not be recorded: {type(exc).__name__}: {exc}")
    finally:
        running.stop()


def record_telemetry(receiver: OtlpReceiver, recorder: TrialRecorder) -> None:
    """What the agent's OpenTelemetry sent, as it arrived: ``otlp/<signal>.jsonl`` (one export
    request a line, in OTLP JSON), and one line in the trial's log."""
    exports = receiver.exports()
    for signal in ("traces", "metrics", "logs"):
        lines = [json.dumps(e.to_json(), ensure_ascii=False) for e in exports if e.signal == signal]
        if lines:
            recorder.artifact(f"otlp/{signal}.jsonl", "".join(line + "\n" for line in lines))
    refused = f", {receiver.refused} refused" if receiver.refused else ""
    recorder.log(f"OpenTelemetry from the agent: {len(exports)} export(s){refused}")


def trial_telemetry(sandbox: Any) -> OtlpReceiver | None:
    """The trial's OTLP receiver, None when its agent does not export telemetry."""
    running: TrialMocks | None = getattr(sandbox, "mock_runtime", None)
    return running.receiver if running is not None else None


def mock_logs(sandbox: Any) -> dict[str, MockLog]:
    """The calls of the sandbox's mocks so far (empty without mocks)."""
    running: TrialMocks | None = getattr(sandbox, "mock_runtime", None)
    return running.logs() if running is not None else {}
