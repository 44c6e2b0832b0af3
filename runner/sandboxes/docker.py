"""The ``docker`` sandbox: one container per trial, driven through the ``docker`` SDK (``engine``).

The container's one process under Docker's init is its keep-alive, a small shell server that
runs the trial's steps (``runner.sandboxes.container_steps``), with a read-only root file system,
no capabilities, the network off (``none``) unless the variant allows it (then the host's
network, as for the other kinds), and CPU, memory and process limits. The trial's workspace and
home are bind-mounted at the same paths as on the host, its tmp folder at /tmp, and the
``proctor`` package read-only on PYTHONPATH so runner-kit agents work with the image's python3.

Each ``run`` is a step given to that server (a fork in the container instead of an engine exec,
which costs 50 ms or more), or an exec where the server cannot be used. When a step ends, or its
time is up, every process it left is killed (all but init and the keep-alive), so nothing
outlives its step, as under bwrap. The steps of one trial run one at a time. ``destroy`` hands
the container to a background thread that removes it (a removal takes the engine about as long
as a container's start), so the trial does not wait for it; a process waits for those removals
before it exits. The container of a Proctor that died ends when its server sees no writer left
on its requests (a step running then ends first), and is removed by the watchdog
(``runner.sandboxes.containment``, for an engine on a unix socket); where the server cannot
serve, the keep-alive is a sleep that ends a day later.

A trial costs the engine a create, a start and an inspect (the SDK's low-level create gives the
container's id at once, where the high-level one inspects first); whether a step left a process
behind is read from the container's cgroup on the host when Proctor sees it (else the engine
lists the container's processes, running ``ps``, and every step is an exec).

Variant options: ``image`` (default proctor-base:latest, built offline by tests/setup/docker.sh;
never pulled; any image with sh, sleep and cat works; proctor-agents:latest, built by
tests/setup/agent-image.sh, adds node and the five agent CLIs: docs/agents-in-docker.md), ``cpus`` (2), ``memory`` ("2g"),
``pids`` (512), ``expose=[...]`` (host paths mounted read-only at the same place).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import proctor
from proctor.definitions import Variant
from runner.sandboxes.base import LineSink, ProcessResult, SandboxError
from runner.sandboxes.container_removal import remove_later
from runner.sandboxes.container_steps import ServerStep, StepServer
from runner.sandboxes.containment import watch_container
from runner.sandboxes.engine import (
    TIMEOUT_S,
    EngineError,
    client,
    connect,
    engine_errors,
    start_exec,
    unix_socket_path,
)
from runner.sandboxes.local import LocalSandbox
from runner.sandboxes.processes import TERMINATE_GRACE_S, LineSplitter

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

DEFAULT_IMAGE = "proctor-base:latest"
# The base image plus node and the real agent CLIs (docs/agents-in-docker.md); select it with
# a variant's image= option.
AGENT_IMAGE = "proctor-agents:latest"
DEFAULT_CPUS = 2.0
DEFAULT_MEMORY = "2g"
DEFAULT_PIDS = 512
# How long a container lives if its worker dies without destroying it, where its step server
# cannot serve (it ends with the worker where it can).
KEEPALIVE_S = 24 * 60 * 60
SANDBOX_TMP = "/tmp"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LABEL = "proctor.sandbox"

# Kills every process of the container but init (1), the keep-alive (the step server,
# runner.sandboxes.container_steps) and itself, with signal $1; for KILL, again until none is
# left (a process may fork while the list is read). The keep-alive is the child of init that
# started first: a process orphaned by a step is reparented to init too, but always starts later.
SWEEP_SCRIPT = r"""
sig=$1 keep= first= round=0
read -r children < /proc/1/task/1/children
for p in $children; do
  read -r stat < "/proc/$p/stat" 2>/dev/null || continue
  set -- ${stat##*) }
  shift 19
  if [ -z "$first" ] || [ "$1" -lt "$first" ]; then first=$1 keep=$p; fi
done
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
# How often a step's end is asked of the engine while its output stream stays open (a child
# holding it), from the first pause to the longest.
FIRST_PAUSE_S = 0.05
LONGEST_PAUSE_S = 0.25
# How long the output still in the stream is read once a step ended.
DRAIN_S = 5.0


def _engine() -> DockerClient:
    try:
        return client()
    except EngineError as exc:
        raise SandboxError(
            f"the docker sandbox is unavailable: no Docker engine answers ({exc.explanation})"
        ) from exc


def _missing_image(image: str) -> str:
    builder = "agent-image.sh" if image == AGENT_IMAGE else "docker.sh"
    return f"the image {image} is not on this engine (tests/setup/{builder} builds it offline)"


def docker_problem(image: str = DEFAULT_IMAGE) -> str | None:
    """Why the docker sandbox cannot run ``image`` here, or None when it can (three requests to
    the engine, on a client of their own that waits 10 s at most)."""
    try:
        engine = connect(timeout=10)
    except EngineError as exc:
        return f"no Docker engine answers ({exc.explanation})"
    try:
        with engine_errors():
            engine.ping()
            engine.images.get(image)
    except EngineError as exc:
        if exc.status == 404:
            return _missing_image(image)
        return f"the engine could not inspect {image} ({exc.explanation})"
    finally:
        engine.close()
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


def _ignore(_: bytes) -> None:
    pass


def _cgroup_mounts() -> list[tuple[frozenset[str] | None, str, str]]:
    """This process's cgroup mounts: (controllers, or None for cgroup v2; mount point; the
    cgroup path mounted there)."""
    mounts: list[tuple[frozenset[str] | None, str, str]] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            before, _, after = line.partition(" - ")
            fields, kind = before.split(), after.split()
            if len(fields) < 5 or len(kind) < 3:
                continue
            if kind[0] == "cgroup2":
                mounts.append((None, fields[4], fields[3]))
            elif kind[0] == "cgroup":
                mounts.append((frozenset(kind[2].split(",")), fields[4], fields[3]))
    return mounts


def _container_procs_file(init_pid: int, container_id: str) -> Path | None:
    """The ``cgroup.procs`` file listing the container's processes, read on the host: found
    through its init's host pid when this process sees the engine's host (the same pids and
    cgroup folders, checked by finding that pid in it); else None."""
    try:
        lines = Path(f"/proc/{init_pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    mounts = _cgroup_mounts()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if container_id not in path:
            continue
        wanted = frozenset(controllers.split(",")) if controllers else None
        for mounted, point, root in mounts:
            if wanted is None or mounted is None:
                if wanted is not mounted:
                    continue  # a v1 line wants a v1 mount, a v2 line the v2 one
            elif not wanted <= mounted:
                continue
            relative = path[len(root) :] if root != "/" and path.startswith(root) else path
            candidate = Path(point + relative) / "cgroup.procs"
            with contextlib.suppress(OSError):
                if str(init_pid) in candidate.read_text().split():
                    return candidate
    return None


class DockerSandbox(LocalSandbox):
    """The local sandbox's trial folders, mounted into a container that runs every step."""

    kind = "docker"
    sees_host_files = False
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
        self.engine = _engine()
        super().__init__()
        self.image = image
        self.network = network
        self.user = f"{os.getuid()}:{os.getgid()}"
        self.kit_dir = str(Path(proctor.__file__).resolve().parent)
        self.container: Container | None = None
        self.procs_file: Path | None = None
        self.steps: StepServer | None = None
        try:
            with engine_errors():
                self.container = self._start_container(nano_cpus, memory_bytes, pids_limit, expose)
        except Exception as exc:
            self.destroy()
            if isinstance(exc, SandboxError):
                raise
            if isinstance(exc, EngineError) and exc.status == 0:
                raise SandboxError(
                    f"the docker sandbox is unavailable: no Docker engine answers ({exc})"
                ) from exc
            if isinstance(exc, EngineError) and exc.status == 404 and "image" in str(exc).lower():
                raise SandboxError(
                    f"the docker sandbox is unavailable: {_missing_image(image)}"
                ) from exc
            raise SandboxError(
                f"the docker sandbox could not start a container from {image}: {exc}"
            ) from exc

    @property
    def container_id(self) -> str | None:
        """The container's id, None once destroyed."""
        return None if self.container is None else self.container.id

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
    ) -> Container:
        """Create and start the container; it is ``self.container`` from its create on, so a
        failure after it still removes it (SDK errors are the caller's to translate)."""
        from docker.types import Mount  # the SDK: imported with the process's client (engine)

        # The trial's mocks (runner.mocks) live here: shims, unix sockets, the bridge.
        mocks_folder = self.root / "mocks"
        mocks_folder.mkdir(exist_ok=True)
        # The container's /etc/hosts, from our file: a mock with a host name adds its line when
        # it starts, after the container (runner.mocks.lifecycle), and the root is read-only.
        hosts = mocks_folder / "hosts"
        hosts.write_text(_container_hosts(self.network), encoding="utf-8")
        hosts.chmod(0o644)
        self.steps = StepServer(self.root / "steps")
        binds = [
            (str(self.steps.folder), str(self.steps.folder), True),
            (str(mocks_folder), str(mocks_folder), True),
            (str(hosts), "/etc/hosts", True),
            (str(self.tmp), SANDBOX_TMP, False),
            (str(self.host_workspace), self.workspace, False),
            (str(self.host_home), self.home, False),
            (self.kit_dir, self.kit_dir, True),
            *((os.path.abspath(p), os.path.abspath(p), True) for p in expose),
        ]
        api = self.engine.api
        host: dict[str, Any] = dict(
            mounts=[
                Mount(target, source, type="bind", read_only=ro) for source, target, ro in binds
            ],
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
        create: dict[str, Any] = dict(
            command=self.steps.container_command(KEEPALIVE_S),
            working_dir=self.workspace,
            user=self.user,
            labels={LABEL: self.kind, f"{LABEL}.folder": str(self.root)},
            hostname="sandbox",
        )
        self._container_options(create, host)
        # A create, never a pull (containers.run would pull): a missing image is an error, not
        # a download. The low-level create answers with the id before anything else can fail,
        # so the container is watched and removed from then on.
        created = api.create_container(
            self.image, host_config=api.create_host_config(**host), **create
        )
        container = self.container = self.engine.containers.prepare_model({"Id": created["Id"]})
        if socket_path := unix_socket_path(self.engine):
            watch_container(socket_path, container.id)
        container.start()
        container.reload()
        state = container.attrs["State"]
        if not state.get("Running"):
            raise SandboxError(
                f"the docker sandbox's container from {self.image} did not keep running"
            )
        init_pid = int(state.get("Pid") or 0)
        self.procs_file = _container_procs_file(init_pid, container.id)
        # Steps go to the server only where the container's processes are seen from here (a
        # step's leftovers are found on the host); else each is an exec.
        if self.procs_file is not None and self.steps.wait_until_ready():
            with contextlib.suppress(OSError):
                others = self._container_pids() - {init_pid}
                if len(others) == 1:
                    self.steps.serve(others.pop())
        return container

    def _container_options(self, create: dict[str, Any], host: dict[str, Any]) -> None:
        """The container's create options and host options, as given to the SDK; a kind built
        on this one changes them here."""

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

    def _create_exec(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        user: str | None = None,
    ) -> str:
        with engine_errors():
            created = self.engine.api.exec_create(
                self.container_id,
                list(argv),
                stdout=True,
                stderr=True,
                stdin=False,
                tty=False,
                user=user or self.user,
                environment=None if env is None else [f"{k}={v}" for k, v in env.items()],
                workdir=cwd,
            )
        return str(created["Id"])

    def _sweep(self, signal_name: str) -> None:
        """Signal every process the steps left running (one exec)."""
        exec_id = self._create_exec(["sh", "-c", SWEEP_SCRIPT, "sweep", signal_name])
        stream = start_exec(self.engine, exec_id)
        try:
            if not stream.pump(_ignore, _ignore, TIMEOUT_S):
                raise EngineError(0, f"killing the leftover processes took over {TIMEOUT_S}s")
        finally:
            stream.close()

    def _container_pids(self) -> set[int]:
        """The host pids of the container's processes, from its cgroup (OSError if gone)."""
        assert self.procs_file is not None
        return {int(pid) for pid in self.procs_file.read_text().split()}

    def _anything_left(self) -> bool:
        """Whether a process other than the init and the keep-alive is in the container."""
        if self.procs_file is not None:
            with contextlib.suppress(OSError):
                return len(self._container_pids()) > 2
        assert self.container is not None
        with engine_errors():
            top = self.container.top()
        return len(top.get("Processes") or []) > 2

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout_s: float | None = None,
        on_line: LineSink | None = None,
        user: str | None = None,
    ) -> ProcessResult:
        """As every sandbox's; ``user``: run as that user of the container (an exec) instead
        of the container's own."""
        if self.container_id is None:
            raise SandboxError("the docker sandbox was already destroyed")
        started = time.monotonic()
        full_env = self.base_env()
        full_env.update(env or {})
        # With the network off, only the mocks' ports, bridged to their sockets (runner.mocks).
        command = self.mocks.bridged(argv, "python3") if self.mocks and not self.network else argv
        folder = cwd or self.workspace
        out, err = LineSplitter("stdout", on_line), LineSplitter("stderr", on_line)
        step: ServerStep | ExecStep
        try:
            if (
                user is None
                and self.steps is not None
                and self.steps.can_run(command, full_env, folder)
            ):
                step = self.steps.start(command, full_env, folder, (out, err))
            else:
                step = ExecStep(self, command, full_env, folder, (out, err), user)
        except (EngineError, OSError) as exc:
            why = exc.explanation if isinstance(exc, EngineError) else str(exc)
            raise SandboxError(f"the docker sandbox could not run {argv[0]}: {why}") from exc
        try:
            try:
                timed_out = not step.follow(None if timeout_s is None else started + timeout_s)
                if timed_out:
                    self._sweep("TERM")
                    step.follow(time.monotonic() + TERMINATE_GRACE_S)
                # After a normal exit too: a backgrounded child must not outlive its step.
                # Reading the container's cgroup is much cheaper than the sweep's exec.
                if timed_out or self._anything_left():
                    self._sweep("KILL")
                    step.follow(time.monotonic() + DRAIN_S)
                step.drain(DRAIN_S)
            except BaseException as exc:
                # The engine failed, or the line sink raised: no process of the step may stay.
                if not isinstance(exc, EngineError):
                    with contextlib.suppress(EngineError):
                        self._sweep("KILL")
                raise
            finally:
                step.close()
                out.close()
                err.close()
        except EngineError as exc:
            raise SandboxError(
                f"the docker engine failed while running {argv[0]}: {exc.explanation}"
            ) from exc
        result = ProcessResult(
            exit_code=None if timed_out else step.exit_code,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
            duration_ms=int((time.monotonic() - started) * 1000),
        )
        reason = step.why_not_started(command[0], result)
        return ProcessResult.not_started(argv[0], reason, result.duration_ms) if reason else result

    def destroy(self) -> None:
        if self.steps is not None:
            self.steps.close()
        container, self.container = self.container, None
        if container is not None:
            # Off the trial's path; listed with the watchdog until it is gone.
            remove_later(container)
        super().destroy()


class ExecStep:
    """One step as an engine exec, where the step server cannot run it: its output from the
    exec's stream, its end asked of the engine."""

    def __init__(
        self,
        box: DockerSandbox,
        command: Sequence[str],
        env: Mapping[str, str],
        cwd: str,
        streams: tuple[LineSplitter, LineSplitter],
        user: str | None = None,
    ) -> None:
        self.box = box
        self.exec_id = box._create_exec(command, env, cwd, user)
        self.stream = start_exec(box.engine, self.exec_id)
        self.out, self.err = streams
        self.exit_code: int | None = None
        self.ended = False

    def follow(self, deadline: float | None) -> bool:
        """Read the step's output until its process exits (True), or until ``deadline`` passed
        (False).

        The output stream usually ends as the process exits; it may end earlier (the process
        closed its stdout) or later (a background child holds it), so the engine is asked too
        whenever the stream ends and, while it stays open, more rarely the longer the step runs.
        """
        pause = FIRST_PAUSE_S
        while not self.ended:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return self._ask()
            self._read(pause if remaining is None else min(pause, remaining))
            self._ask()
            pause = min(pause * 2, LONGEST_PAUSE_S)
        return True

    def _ask(self) -> bool:
        """Whether the engine says the step ended (its exit code kept)."""
        with engine_errors():
            state = self.box.engine.api.exec_inspect(self.exec_id)
        if not state["Running"]:
            self.ended, self.exit_code = True, state.get("ExitCode")
        return self.ended

    def _read(self, wait_s: float) -> None:
        """Take the step's output for up to ``wait_s`` (only wait, once the stream ended)."""
        if self.stream.ended:
            time.sleep(max(wait_s, 0))
        else:
            self.stream.pump(self.out.feed, self.err.feed, max(wait_s, 0))

    def drain(self, seconds: float) -> None:
        """The output still in the stream, until it ends or ``seconds`` passed."""
        until = time.monotonic() + seconds
        while not self.stream.ended and time.monotonic() < until:
            self._read(until - time.monotonic())

    def close(self) -> None:
        self.stream.close()

    @staticmethod
    def why_not_started(program: str, result: ProcessResult) -> str:
        """The engine reports a missing program as the exec's own output (exit 126/127): why
        the program could not start, or "" when it ran."""
        if result.exit_code in (126, 127) and "OCI runtime exec failed" in result.output:
            return "not found" if "not found" in result.output else "cannot be executed"
        return ""
