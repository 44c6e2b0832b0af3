"""The ``docker`` sandbox: one container per trial, through the docker SDK and the local engine.

The container runs a keep-alive process under Docker's init, with a read-only root file system,
no capabilities, the network off (``none``) unless the variant allows it (then the host's
network, as for the other kinds), and CPU, memory and process limits. The trial's workspace and
home are bind-mounted at the same paths as on the host, its tmp folder at /tmp, and the
``proctor`` package read-only on PYTHONPATH so runner-kit agents work with the image's python3.

Each ``run`` is an exec in that container. When it ends, or its time is up, every process it
left is killed (all but the init and the keep-alive), so nothing outlives its step, as under
bwrap. The steps of one trial run one at a time. ``destroy`` removes the container; so does
the watchdog of a Proctor that died (``runner.sandboxes.containment``, for an engine on a unix
socket), and else a container whose worker died removes itself when its keep-alive ends, a day
later.

Variant options: ``image`` (default proctor-base:latest, built offline by tests/setup/docker.sh;
never pulled; any image with sh, sleep and cat works; proctor-agents:latest, built by
tests/setup/agent-image.sh, adds node and the five agent CLIs: docs/agents-in-docker.md), ``cpus`` (2), ``memory`` ("2g"),
``pids`` (512), ``expose=[...]`` (host paths mounted read-only at the same place).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import proctor
from proctor.definitions import Variant
from runner.sandboxes.base import LineSink, ProcessResult, SandboxError
from runner.sandboxes.containment import watch_container
from runner.sandboxes.local import LocalSandbox
from runner.sandboxes.processes import TERMINATE_GRACE_S, LineSplitter

log = logging.getLogger(__name__)

DEFAULT_IMAGE = "proctor-base:latest"
# The base image plus node and the real agent CLIs (docs/agents-in-docker.md); select it with
# a variant's image= option.
AGENT_IMAGE = "proctor-agents:latest"
DEFAULT_CPUS = 2.0
DEFAULT_MEMORY = "2g"
DEFAULT_PIDS = 512
# How long a container lives if its worker dies without destroying it.
KEEPALIVE_S = 24 * 60 * 60
# Seconds to wait for the engine on control calls (create, inspect, remove).
ENGINE_TIMEOUT_S = 60
SANDBOX_TMP = "/tmp"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LABEL = "proctor.sandbox"

# Kills every process of the container but init (1), the keep-alive ($2) and itself, with
# signal $1; for KILL, again until none is left (a process may fork while the list is read).
SWEEP_SCRIPT = r"""
sig=$1 keep=$2 round=0
while [ $round -lt 20 ]; do
  found=
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case $p in 1|"$keep"|$$) continue ;; esac
    read -r _ _ state _ < "$d/stat" 2>/dev/null || continue
    case $state in Z|X) continue ;; esac
    kill -s "$sig" "$p" 2>/dev/null && found=1
  done
  [ -n "$found" ] && [ "$sig" = KILL ] || break
  round=$((round + 1))
done
"""


def _engine_client(timeout: float | None) -> Any:
    import docker

    return docker.APIClient(**docker.utils.kwargs_from_env(), timeout=timeout, version="auto")


def _engine_socket() -> str | None:
    """The engine's unix socket, for the watchdog (None for an engine reached over TCP)."""
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    return host.removeprefix("unix://") if host.startswith("unix://") else None


def docker_problem(image: str = DEFAULT_IMAGE) -> str | None:
    """Why the docker sandbox cannot run ``image`` here, or None when it can."""
    try:
        import docker
    except ImportError:
        return "the docker Python package is not installed"
    try:
        client = _engine_client(timeout=10)
        client.ping()
    except Exception as exc:
        return f"no Docker engine answers ({type(exc).__name__}: {exc})"
    try:
        client.inspect_image(image)
    except docker.errors.ImageNotFound:
        builder = "agent-image.sh" if image == AGENT_IMAGE else "docker.sh"
        return f"the image {image} is not on this engine (tests/setup/{builder} builds it offline)"
    except Exception as exc:
        return f"the engine could not inspect {image} ({type(exc).__name__}: {exc})"
    return None


def _container_hosts(network: bool) -> str:
    """What Docker itself would write: the machine's hosts on its network, else loopback only."""
    if network:
        with contextlib.suppress(OSError):
            return Path("/etc/hosts").read_text(encoding="utf-8")
    return "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"


def _memory_bytes(value: Any) -> int:
    """``2g``, ``512m``, ``1024k`` or a number of bytes."""
    if isinstance(value, int) and value > 0:
        return value
    text = str(value).strip().lower().removesuffix("b")
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    try:
        if text and text[-1] in units:
            number = int(float(text[:-1]) * units[text[-1]])
        else:
            number = int(text)
    except ValueError:
        number = 0
    if number <= 0:
        raise SandboxError(
            f"the docker sandbox's memory option {value!r} is not a size like 2g or 512m"
        )
    return number


def _positive(name: str, value: Any, kind: type) -> Any:
    try:
        number = kind(value)
    except (TypeError, ValueError):
        number = 0
    if number <= 0:
        raise SandboxError(
            f"the docker sandbox's {name} option {value!r} must be a positive number"
        )
    return number


class DockerSandbox(LocalSandbox):
    """The local sandbox's trial folders, mounted into a container that runs every step."""

    kind = "docker"
    option_names = frozenset({"image", "cpus", "memory", "pids", "expose"})
    limits_refused_because = ""
    # Writes outside the mounted folders fail (read-only root file system): nothing to audit.
    confines_writes = True

    def __init__(
        self,
        *,
        image: str = DEFAULT_IMAGE,
        network: bool = False,
        cpus: float = DEFAULT_CPUS,
        memory: Any = DEFAULT_MEMORY,
        pids: int = DEFAULT_PIDS,
        expose: Sequence[str] = (),
    ) -> None:
        nano_cpus = int(_positive("cpus", cpus, float) * 1e9)
        memory_bytes = _memory_bytes(memory)
        pids_limit = _positive("pids", pids, int)
        missing = [path for path in expose if not os.path.exists(path)]
        if missing:
            raise SandboxError(
                f"the docker sandbox cannot expose {', '.join(missing)}: no such path on this machine"
            )
        problem = docker_problem(image)
        if problem:
            raise SandboxError(f"the docker sandbox is unavailable: {problem}")
        super().__init__()
        self.image = image
        self.network = network
        self.user = f"{os.getuid()}:{os.getgid()}"
        self.kit_dir = str(Path(proctor.__file__).resolve().parent)
        self.control = _engine_client(timeout=ENGINE_TIMEOUT_S)
        # Output streams wait as long as the process stays quiet: no socket timeout.
        self.streams = _engine_client(timeout=None)
        self.container_id: str | None = None
        self.engine_socket = _engine_socket()
        try:
            self.container_id = self._start_container(nano_cpus, memory_bytes, pids_limit, expose)
            self.keepalive_pid = self._keepalive_pid()
        except Exception as exc:
            self.destroy()
            if isinstance(exc, SandboxError):
                raise
            raise SandboxError(
                f"the docker sandbox could not start a container from {image}: {exc}"
            ) from exc

    @classmethod
    def for_variant(cls, variant: Variant) -> DockerSandbox:
        options = variant.options
        expose = options.get("expose", ())
        if isinstance(expose, str):
            expose = (expose,)
        return cls(
            image=str(options.get("image", DEFAULT_IMAGE)),
            network=variant.network,
            cpus=options.get("cpus", DEFAULT_CPUS),
            memory=options.get("memory", DEFAULT_MEMORY),
            pids=options.get("pids", DEFAULT_PIDS),
            expose=tuple(expose),
        )

    def _start_container(
        self, nano_cpus: int, memory_bytes: int, pids_limit: int, expose: Sequence[str]
    ) -> str:
        from docker.types import Mount

        # The trial's mocks (runner.mocks) live here: shims, unix sockets, the bridge.
        mocks_folder = self.root / "mocks"
        mocks_folder.mkdir(exist_ok=True)
        # The container's /etc/hosts, from our file: a mock with a host name adds its line when
        # it starts, after the container (runner.mocks.lifecycle), and the root is read-only.
        hosts = mocks_folder / "hosts"
        hosts.write_text(_container_hosts(self.network), encoding="utf-8")
        hosts.chmod(0o644)
        mounts = [
            Mount(str(mocks_folder), str(mocks_folder), type="bind", read_only=True),
            Mount("/etc/hosts", str(hosts), type="bind", read_only=True),
            Mount(SANDBOX_TMP, str(self.tmp), type="bind"),
            Mount(self.workspace, str(self.host_workspace), type="bind"),
            Mount(self.home, str(self.host_home), type="bind"),
            Mount(self.kit_dir, self.kit_dir, type="bind", read_only=True),
            *(
                Mount(os.path.abspath(p), os.path.abspath(p), type="bind", read_only=True)
                for p in expose
            ),
        ]
        host_config = self.control.create_host_config(
            mounts=mounts,
            network_mode="host" if self.network else "none",
            init=True,
            read_only=True,
            auto_remove=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            nano_cpus=nano_cpus,
            mem_limit=memory_bytes,
            memswap_limit=memory_bytes,
            pids_limit=pids_limit,
        )
        # create, never run: the SDK's run() would try to pull a missing image.
        created = self.control.create_container(
            self.image,
            command=["sleep", str(KEEPALIVE_S)],
            host_config=host_config,
            working_dir=self.workspace,
            labels={LABEL: self.kind, f"{LABEL}.folder": str(self.root)},
            hostname="sandbox",
        )
        container_id = created["Id"]
        self.container_id = container_id
        if self.engine_socket:
            watch_container(self.engine_socket, container_id)
        self.control.start(container_id)
        return container_id

    def _keepalive_pid(self) -> str:
        """The keep-alive's pid inside the container: Docker's init (pid 1) has it as its only
        child right after the start."""
        output = self._exec_quietly(["cat", "/proc/1/task/1/children"]).split()
        if not output:
            raise SandboxError(
                f"the docker sandbox's container from {self.image} did not keep running"
            )
        return output[0]

    def base_env(self) -> dict[str, str]:
        env = {
            "PATH": f"{self.home}/.local/bin:{SYSTEM_PATH}",
            "HOME": self.home,
            "TMPDIR": SANDBOX_TMP,
            "TERM": "dumb",
            "LANG": "C.UTF-8",
            "USER": os.environ.get("USER", "proctor"),
            # With the system read-only, `npm install -g` lands in $HOME/.local.
            "NPM_CONFIG_PREFIX": f"{self.home}/.local",
            "PYTHONPATH": str(Path(self.kit_dir).parent),
        }
        return self.mocks.apply_env(env) if self.mocks else env

    def _exec_quietly(self, argv: Sequence[str]) -> str:
        """A short control command inside the container, as the sandbox's user; its stdout."""
        exec_id = self.control.exec_create(
            self.container_id, list(argv), user=self.user, stdin=False
        )["Id"]
        output = self.control.exec_start(exec_id, demux=True)
        return (output[0] or b"").decode("utf-8", errors="replace")

    def _sweep(self, signal_name: str) -> None:
        """Signal every process the steps left running."""
        self._exec_quietly(["sh", "-c", SWEEP_SCRIPT, "sweep", signal_name, self.keepalive_pid])

    def _anything_left(self) -> bool:
        """Whether a process other than the init and the keep-alive is in the container."""
        return len(self.control.top(self.container_id).get("Processes") or []) > 2

    def _running(self, exec_id: str) -> bool:
        return bool(self.control.exec_inspect(exec_id)["Running"])

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout_s: float | None = None,
        on_line: LineSink | None = None,
    ) -> ProcessResult:
        if self.container_id is None:
            raise SandboxError("the docker sandbox was already destroyed")
        import docker

        started = time.monotonic()
        full_env = self.base_env()
        full_env.update(env or {})
        # With the network off, only the mocks' ports, bridged to their sockets (runner.mocks).
        command = self.mocks.bridged(argv, "python3") if self.mocks and not self.network else argv
        try:
            exec_id = self.control.exec_create(
                self.container_id,
                list(command),
                stdout=True,
                stderr=True,
                stdin=False,
                tty=False,
                environment=full_env,
                workdir=cwd or self.workspace,
                user=self.user,
            )["Id"]
            frames = self.streams.exec_start(exec_id, stream=True, demux=True)
        except docker.errors.APIError as exc:
            raise SandboxError(
                f"the docker sandbox could not run {argv[0]}: {exc.explanation or exc}"
            ) from exc
        out, err = LineSplitter("stdout", on_line), LineSplitter("stderr", on_line)
        closed = threading.Event()
        reader = threading.Thread(target=self._pump, args=(frames, out, err, closed), daemon=True)
        reader.start()
        try:
            timed_out = self._wait(exec_id, closed, timeout_s)
            if timed_out:
                self._sweep("TERM")
                grace = time.monotonic() + TERMINATE_GRACE_S
                while self._running(exec_id) and time.monotonic() < grace:
                    closed.wait(0.05)
            # After a normal exit too: a backgrounded child must not outlive its step. Listing
            # the container's processes is much cheaper than the sweep's exec.
            if timed_out or self._anything_left():
                self._sweep("KILL")
            reader.join(timeout=5)
            exit_code = self.control.exec_inspect(exec_id)["ExitCode"]
        except docker.errors.APIError as exc:
            raise SandboxError(
                f"the docker engine failed while running {argv[0]}: {exc.explanation or exc}"
            ) from exc
        result = ProcessResult(
            exit_code=None if timed_out else exit_code,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
            duration_ms=int((time.monotonic() - started) * 1000),
        )
        return self._not_started(argv, result)

    @staticmethod
    def _pump(
        frames: Iterator[tuple[bytes | None, bytes | None]],
        out: LineSplitter,
        err: LineSplitter,
        closed: threading.Event,
    ) -> None:
        try:
            for stdout, stderr in frames:
                if stdout:
                    out.feed(stdout)
                if stderr:
                    err.feed(stderr)
        except Exception:  # the engine closed the stream under us (container removed): stop reading
            pass
        finally:
            out.close()
            err.close()
            closed.set()

    def _wait(self, exec_id: str, closed: threading.Event, timeout_s: float | None) -> bool:
        """Wait until the exec's process exits; True when ``timeout_s`` ran out first.

        The output stream usually closes as the process exits; it may close earlier (the process
        closed its stdout) or later (a background child holds it), so the engine is asked, more
        rarely the longer the step runs.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        pause = 0.005
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return self._running(exec_id)
            wait_for = pause if remaining is None else min(pause, remaining)
            if closed.is_set():
                time.sleep(wait_for)
            else:
                closed.wait(wait_for)
            if not self._running(exec_id):
                return False
            pause = min(pause * 2, 0.25)

    def _not_started(self, argv: Sequence[str], result: ProcessResult) -> ProcessResult:
        """The engine reports a missing program as the exec's own output (exit 126/127); make it
        the same result as the other kinds give."""
        if result.exit_code in (126, 127) and "OCI runtime exec failed" in result.output:
            reason = "not found" if "not found" in result.output else "cannot be executed"
            return ProcessResult(
                exit_code=127,
                stdout="",
                stderr=f"could not start {argv[0]}: {reason}\n",
                timed_out=False,
                duration_ms=result.duration_ms,
            )
        return result

    def destroy(self) -> None:
        container_id, self.container_id = self.container_id, None
        if container_id is not None:
            import docker

            try:
                self.control.remove_container(container_id, force=True, v=True)
            except docker.errors.NotFound:
                pass  # auto-removed already
            except docker.errors.APIError as exc:
                # Destroying runs while a trial ends: report, never raise over the outcome.
                if "already in progress" not in str(exc):
                    log.warning(
                        "could not remove docker sandbox container %s: %s", container_id[:12], exc
                    )
            if self.engine_socket:
                watch_container(self.engine_socket, container_id, done=True)
        super().destroy()
