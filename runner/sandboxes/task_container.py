"""A task case's sandbox: a docker container from the task's own image, shaped by its task.

The image's ``WORKDIR`` (or the task's ``workdir``) is the workspace: its files are copied out
of the image into the trial's workspace folder, which is then mounted at that path, so the
workspace diff and the trial's other readers see it as on every sandbox. The container keeps
the image's environment, user-writable root file system and PATH, with the task's
``[environment.env]``, limits (``cpus``, ``memory_mb``) and agent ``user``; the network is on
only when the variant allows it and the task does not say ``allow_internet = false`` (the
trial's mocks stay reachable either way). ``/logs/agent`` and ``/logs/verifier`` exist from
the start. Folders are put into the container (the hidden tests, the solution) and read back
out of it (the verifier's logs) through the engine's archive API, never through a mount the
agent could have seen.
"""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.definitions import Variant
from proctor.tasks import Task
from runner.sandboxes.base import SandboxError
from runner.sandboxes.docker import DEFAULT_CPUS, DEFAULT_MEMORY, DEFAULT_PIDS, DockerSandbox
from runner.sandboxes.engine import EngineError, client, engine_errors
from runner.sandboxes.task_images import TaskImage, task_image
from runner.sandboxes.task_services import TaskServices

if TYPE_CHECKING:
    from docker.models.containers import Container

LOGS = "/logs"
AGENT_LOGS = "/logs/agent"
VERIFIER_LOGS = "/logs/verifier"
ROOT_USERS = ("root", "0", "0:0")


class TaskSandbox(DockerSandbox):
    """A docker sandbox whose container is the task's environment."""

    def __init__(
        self,
        *,
        task: Task,
        image: TaskImage,
        network: bool,
        cpus: Any = DEFAULT_CPUS,
        memory: Any = DEFAULT_MEMORY,
        pids: Any = DEFAULT_PIDS,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.task = task
        self.task_image = image
        self.log = log
        self.services: TaskServices | None = None
        super().__init__(image=image.name, network=network, cpus=cpus, memory=memory, pids=pids)

    @classmethod
    def for_task(cls, variant: Variant, task: Task, log: Any = None) -> TaskSandbox:
        """The sandbox of one trial of ``task`` under ``variant`` (its image built first when
        its digest has none yet: ``log`` gets the build's lines)."""
        try:
            engine = client()
        except EngineError as exc:
            raise SandboxError(
                f"the docker sandbox is unavailable: no Docker engine answers ({exc.explanation})"
            ) from exc
        image = task_image(task, engine, log)
        options = variant.options
        return cls(
            task=task,
            image=image,
            network=variant.network and task.allow_internet,
            cpus=task.cpus or options.get("cpus", DEFAULT_CPUS),
            memory=f"{task.memory_mb}m"
            if task.memory_mb
            else options.get("memory", DEFAULT_MEMORY),
            pids=options.get("pids", DEFAULT_PIDS),
            log=log,
        )

    def _start_container(
        self, nano_cpus: int, memory_bytes: int, pids_limit: int, expose: Sequence[str]
    ) -> Container:
        self.workspace = self.task_image.workdir
        if self.task.agent_user:
            self.user = self.task.agent_user
        self._copy_workdir_out()
        self._open_to_the_agent()
        if self.task.services:
            self.services = TaskServices(self.engine, self.task)
            self.services.start(internal=not self.network, folder=str(self.root), log=self.log)
        container = super()._start_container(nano_cpus, memory_bytes, pids_limit, expose)
        logs = {f"{LOGS}/{name}/": None for name in ("agent", "verifier")}
        self.put_files(logs, "/", mode=0o777)
        return container

    def _container_options(self, create: dict[str, Any], host: dict[str, Any]) -> None:
        create["working_dir"] = self.workspace
        create["environment"] = [f"{k}={v}" for k, v in self.task.env.items()]
        # The task's environment is its own: tools it installs, files it writes outside the
        # workspace. The agent's capabilities stay dropped.
        host["read_only"] = False
        if self.services is not None:  # main joins the trial's network, under its name
            api, network = self.engine.api, self.services.network
            host["network_mode"] = network
            create["networking_config"] = api.create_networking_config(
                {network: api.create_endpoint_config(aliases=[self.task.main_service])}
            )

    def destroy(self) -> None:
        main = self.container_id
        super().destroy()
        if self.services is not None:
            self.services.stop(main)

    def base_env(self) -> dict[str, str]:
        env = super().base_env()
        env["PATH"] = f"{self.home}/.local/bin:{self.task_image.path}"
        env.pop("NPM_CONFIG_PREFIX", None)
        env.update(self.task.env)
        return env

    def _copy_workdir_out(self) -> None:
        """The image's files under the workspace's path, into the trial's workspace folder
        (a container created for it and removed, never started)."""
        api = self.engine.api
        with engine_errors():
            helper = str(api.create_container(self.image, command=["true"])["Id"])
        try:
            try:
                with engine_errors():
                    stream, _ = api.get_archive(helper, self.workspace)
                    data = b"".join(stream)
            except EngineError as exc:
                if exc.status == 404:
                    return  # the image has no such folder: the workspace starts empty
                raise
            with tarfile.open(fileobj=io.BytesIO(data)) as archive:
                members = []
                for member in archive.getmembers():
                    _, _, rest = member.name.partition("/")
                    if not rest:
                        continue
                    member.name = rest
                    members.append(member)
                archive.extractall(self.host_workspace, members=members, filter="tar")
        finally:
            with contextlib.suppress(EngineError), engine_errors():
                api.remove_container(helper, force=True)

    def _open_to_the_agent(self) -> None:
        """Another user than ours writes the mounted workspace: let it."""
        if not self.task.agent_user or self.task.agent_user in ROOT_USERS:
            return
        for folder, dirs, files in os.walk(self.host_workspace):
            for name in [*dirs, *files]:
                path = Path(folder, name)
                if not path.is_symlink():
                    path.chmod(path.stat().st_mode | (0o777 if path.is_dir() else 0o666))
        self.host_workspace.chmod(0o777)

    def put_files(
        self, files: Mapping[str, Path | bytes | None], target: str, *, mode: int | None = None
    ) -> None:
        """Put files into the container under ``target`` (relative name -> a host file, its
        bytes, or None for a folder when the name ends with "/"), owned by root."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            for name, content in files.items():
                info = tarfile.TarInfo(name.strip("/"))
                if content is None:
                    info.type, info.mode = tarfile.DIRTYPE, mode or 0o755
                    archive.addfile(info)
                    continue
                data = content.read_bytes() if isinstance(content, Path) else content
                info.size = len(data)
                if mode is not None:
                    info.mode = mode
                elif isinstance(content, Path):
                    info.mode = content.stat().st_mode & 0o777
                else:
                    info.mode = 0o644
                archive.addfile(info, io.BytesIO(data))
        try:
            with engine_errors():
                self.engine.api.put_archive(self.container_id, target, buffer.getvalue())
        except EngineError as exc:
            raise SandboxError(
                f"could not put files into the container at {target}: {exc}"
            ) from exc

    def put_folder(
        self, folder: Path | None, target: str, *, also: Mapping[str, Path] | None = None
    ) -> None:
        """A host folder's files (and ``also``'s: name -> file) at ``target`` in the
        container."""
        top = target.strip("/")
        files: dict[str, Path | bytes | None] = {f"{top}/": None}
        if folder is not None and folder.is_dir():
            for path in sorted(folder.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    files[f"{top}/{path.relative_to(folder).as_posix()}"] = path
        for name, path in (also or {}).items():
            files[f"{top}/{name}"] = path
        self.put_files(files, "/")

    def copy_out(self, path: str, destination: Path) -> str:
        """The container's folder ``path`` copied into ``destination`` (a file: into it under
        its name): "folder" or "file", or "" when the container has no such path."""
        try:
            with engine_errors():
                stream, _ = self.engine.api.get_archive(self.container_id, path)
                data = b"".join(stream)
        except EngineError as exc:
            if exc.status == 404:
                return ""
            raise SandboxError(f"could not read {path} from the container: {exc}") from exc
        destination.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            members = []
            everything = archive.getmembers()
            kind = "file" if everything and everything[0].isfile() else "folder"
            for member in everything:
                if not (member.isfile() or member.isdir()):
                    continue
                _, _, rest = member.name.partition("/")
                if not rest and kind == "folder":
                    continue
                member.name = rest or member.name
                members.append(member)
            archive.extractall(destination, members=members, filter="data")
        return kind
