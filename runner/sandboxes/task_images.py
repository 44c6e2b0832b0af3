"""A task case's image: built from its Dockerfile once per content digest, or named as given.

The build context (the task's ``environment/`` folder; a Terminal-Bench task's own folder
without its tests and solution) is packed with the Dockerfile's ``FROM`` lines mapped onto
local images, hashed, and built as ``proctor-task:<digest>`` unless that tag is already on the
engine, so every trial of the task and every later batch reuses it. Nothing is ever pulled: a
``FROM`` or ``docker_image`` the engine lacks is one error naming it and the map that would fix
it. The map is the task's (``tasks(images=...)``) over the worker's ``PROCTOR_IMAGE_MAP``
(JSON, or ``name=image,name=image``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.tasks import TERMINAL_BENCH, Service, Task
from runner.sandboxes.base import SandboxError
from runner.sandboxes.engine import EngineError, engine_errors

if TYPE_CHECKING:
    from docker import DockerClient

IMAGE_MAP_VARIABLE = "PROCTOR_IMAGE_MAP"
TAG_PREFIX = "proctor-task"
# A build's own limit when the task names none.
BUILD_TIMEOUT_S = 30 * 60
# What a Terminal-Bench build context leaves out: the agent must never find them in its image.
HIDDEN_FROM_BUILD = ("tests", "run-tests.sh", "solution.sh", "solution.yaml", "solution")
_FROM = re.compile(r"^(\s*FROM\s+)((?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE)
# One build per digest at a time in this process; the engine's tag makes it once for all.
_building: dict[str, threading.Lock] = {}
_building_lock = threading.Lock()


@dataclass(frozen=True)
class TaskImage:
    """The image a task's container starts from, and what its config says."""

    name: str
    workdir: str
    path: str  # its PATH, for every process of the trial
    env: dict[str, str]


def image_map(task: Task, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The names the task's image may be mapped from: the task's own map over the worker's."""
    text = (os.environ if environ is None else environ).get(IMAGE_MAP_VARIABLE, "").strip()
    mapped: dict[str, str] = {}
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise SandboxError(
                f"{IMAGE_MAP_VARIABLE} must be a JSON object of image names, like "
                '{"ubuntu:24.04": "proctor-base:latest"}'
            )
        mapped.update(value)
    elif text:
        for pair in text.split(","):
            name, sep, local = pair.strip().partition("=")
            if not sep or not name.strip() or not local.strip():
                raise SandboxError(
                    f"{IMAGE_MAP_VARIABLE} must be name=image pairs split by commas, like "
                    f"ubuntu:24.04=proctor-base:latest (got {pair.strip()!r})"
                )
            mapped[name.strip()] = local.strip()
    mapped.update(task.images)
    return mapped


def _fix_hint(name: str) -> str:
    return (
        f'map it onto a local image: tasks(..., images={{"{name}": "proctor-base:latest"}}), '
        f"or {IMAGE_MAP_VARIABLE}={name}=proctor-base:latest for the worker"
    )


def _inspect(engine: DockerClient, name: str) -> dict[str, Any] | None:
    try:
        with engine_errors():
            answer = engine.api.inspect_image(name)
    except EngineError as exc:
        if exc.status == 404:
            return None
        raise SandboxError(f"the engine could not inspect the image {name}: {exc}") from exc
    return answer if isinstance(answer, dict) else None


def task_image(task: Task, engine: DockerClient, log: Any = None) -> TaskImage:
    """The task's image on ``engine``: built when its digest's tag is missing (``log`` gets
    the build's output lines). Raises SandboxError naming what could not be had."""
    mapped = image_map(task)
    if task.docker_image:
        name = mapped.get(task.docker_image, task.docker_image)
        config = _inspect(engine, name)
        if config is None:
            shown = (
                task.docker_image
                if name == task.docker_image
                else f"{name} (mapped from {task.docker_image})"
            )
            raise SandboxError(
                f"task {task.name}: its docker_image {shown} is not on this engine and is "
                f"never pulled; {_fix_hint(task.docker_image)}"
            )
        return _described(name, config, task)
    folder = Path(task.folder)
    context = _build_context(
        task, mapped, engine, folder / task.context, folder / (task.dockerfile or "Dockerfile")
    )
    tag, config = _built(engine, task, context, log)
    return _described(tag, config, task)


def service_image(task: Task, service: Service, engine: DockerClient, log: Any = None) -> str:
    """The image a compose service of the task runs: built from its folder (once per digest,
    like the task's) or its mapped ``image``. Raises SandboxError naming what is missing."""
    mapped = image_map(task)
    if service.build is None:
        assert service.image is not None  # proctor.tasks reads one or the other
        name = mapped.get(service.image, service.image)
        if _inspect(engine, name) is None:
            raise SandboxError(
                f"task {task.name}: service {service.name}'s image {name} is not on this engine "
                f"and is never pulled; {_fix_hint(service.image)}"
            )
        return name
    folder = task.compose_folder / service.build
    context = _build_context(task, mapped, engine, folder, folder / service.dockerfile)
    return _built(engine, task, context, log)[0]


def _built(
    engine: DockerClient, task: Task, context: bytes, log: Any
) -> tuple[str, dict[str, Any]]:
    """The tag of the image ``context`` builds, built unless the engine has it, and its config."""
    digest = hashlib.sha256(context).hexdigest()[:20]
    tag = f"{TAG_PREFIX}:{digest}"
    with _building_lock:
        lock = _building.setdefault(digest, threading.Lock())
    with lock:
        config = _inspect(engine, tag)
        if config is None:
            _build(engine, tag, context, task, log)
            config = _inspect(engine, tag)
            if config is None:
                raise SandboxError(f"task {task.name}: its image {tag} was built but is not there")
    return tag, config


def _described(name: str, config: dict[str, Any], task: Task) -> TaskImage:
    own = config.get("Config") or {}
    env = dict(
        item.split("=", 1) for item in own.get("Env") or [] if isinstance(item, str) and "=" in item
    )
    workdir = task.workdir or own.get("WorkingDir") or "/app"
    path = env.pop("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    return TaskImage(name=name, workdir=workdir, path=path, env=env)


def mapped_dockerfile(text: str, mapped: dict[str, str]) -> tuple[str, list[str]]:
    """The Dockerfile with each ``FROM`` mapped, and the images it then starts from (not a
    stage of its own, not ``scratch``)."""
    stages: set[str] = set()
    bases: list[str] = []
    lines = []
    for line in text.splitlines():
        match = _FROM.match(line)
        if match:
            head, flags, image, rest = match.groups()
            if image.lower() not in stages and image != "scratch" and "$" not in image:
                image = mapped.get(image, image)
                bases.append(image)
            alias = re.search(r"\bAS\s+(\S+)", rest, re.IGNORECASE)
            if alias:
                stages.add(alias.group(1).lower())
            line = f"{head}{flags}{image}{rest}"
        lines.append(line)
    return "\n".join(lines) + "\n", bases


def _build_context(
    task: Task, mapped: dict[str, str], engine: DockerClient, context: Path, dockerfile: Path
) -> bytes:
    """The build context as a tar made the same way every time (its bytes are the digest)."""
    context = context.resolve()
    original = dockerfile.read_text(encoding="utf-8")
    text, bases = mapped_dockerfile(original, mapped)
    for base in bases:
        if _inspect(engine, base) is None:
            wanted = next((k for k, v in mapped.items() if v == base), base)
            raise SandboxError(
                f"task {task.name}: {dockerfile.name} starts FROM {base}, which is not on this "
                f"engine and is never pulled; {_fix_hint(wanted)}"
            )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in sorted(context.rglob("*")):
            relative = path.relative_to(context).as_posix()
            if task.format == TERMINAL_BENCH and relative.split("/")[0] in HIDDEN_FROM_BUILD:
                continue
            if relative == "Dockerfile" or not path.is_file() or path.is_symlink():
                continue
            _add(archive, relative, path.read_bytes(), path.stat().st_mode & 0o777)
        _add(archive, "Dockerfile", text.encode(), 0o644)
    return buffer.getvalue()


def _add(archive: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    archive.addfile(info, io.BytesIO(data))


def _build(engine: DockerClient, tag: str, context: bytes, task: Task, log: Any) -> None:
    error = ""
    try:
        with engine_errors():
            answers = list(
                engine.api.build(
                    fileobj=io.BytesIO(context),
                    custom_context=True,
                    tag=tag,
                    pull=False,
                    rm=True,
                    forcerm=True,
                    decode=True,
                    timeout=task.build_timeout_s or BUILD_TIMEOUT_S,
                )
            )
    except EngineError as exc:
        raise SandboxError(f"task {task.name}: its image could not be built: {exc}") from exc
    for item in answers:
        if not isinstance(item, dict):
            continue
        if item.get("error"):
            error = str(item["error"]).strip()
        elif item.get("stream") and log is not None:
            for text in str(item["stream"]).splitlines():
                if text.strip():
                    log(text)
    if error:
        raise SandboxError(f"task {task.name}: its image could not be built: {error}")
