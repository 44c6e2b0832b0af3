"""Cases read from task folders in the shared formats: Harbor (``task.toml``) and
Terminal-Bench 1 (``task.yaml``).

``tasks("tasks")`` gives one case per task folder under the path (or the path itself when it
is one task). A task case carries its ``Task``: the folder, the image it runs in, its limits,
and the verifier that grades it after the agent (the hidden ``tests/``, run in the container,
scored by the reward file it writes). The agent sees only the instruction, in the variable
``instruction`` (a suite whose prompt is left out uses ``{{instruction}}``).

Reading a folder opens its ``task.toml`` or ``task.yaml``, its instruction and its compose
file (Harbor's ``environment/docker-compose.yaml``, Terminal-Bench's ``docker-compose.yaml``)
only; a folder that is not a valid task raises DefinitionError naming the file and the field.
"""

from __future__ import annotations

import fnmatch
import re
import sys
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from proctor.definitions import Case, DefinitionError, case

HARBOR = "harbor"
TERMINAL_BENCH = "terminal-bench"
# Where each format keeps its verifier entry point and its reference solution.
HARBOR_TESTS_SCRIPT = "tests/test.sh"
TERMINAL_BENCH_TESTS_SCRIPT = "run-tests.sh"
# The agent's limit when the task names none (Harbor's and Terminal-Bench's own default).
DEFAULT_AGENT_TIMEOUT_S = 600
DEFAULT_VERIFIER_TIMEOUT_S = 600
# The longest a case id may be (proctor.rules.HANDLE_MAX; rules imports definitions, not this).
ID_MAX = 100


@dataclass(frozen=True)
class Healthcheck:
    """A command that must succeed before a step's agent starts, tried ``retries`` more times
    ``interval_s`` apart."""

    command: str
    interval_s: float = 1.0
    timeout_s: float = 30.0
    retries: int = 3


@dataclass(frozen=True)
class Service:
    """A compose service beside the agent's container (``main``), reached by its name on the
    trial's own network: built from ``build`` (a folder relative to ``environment/``) or run
    from ``image``."""

    name: str
    build: str | None = None
    dockerfile: str = "Dockerfile"
    image: str | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    command: tuple[str, ...] | str | None = None
    # Docker's healthcheck test (["CMD", ...] or ["CMD-SHELL", "..."]) and its timings.
    healthcheck: tuple[str, ...] = ()
    interval_s: float = 1.0
    timeout_s: float = 10.0
    retries: int = 30
    start_period_s: float = 0.0
    # What ``main`` waits for: "service_started" or "service_healthy" ("" when not a
    # dependency of main).
    main_waits_for: str = ""


@dataclass(frozen=True)
class Step:
    """One step of a multi-step task (``[[steps]]``), its files under ``steps/<name>/``."""

    name: str
    instruction: str
    agent_timeout_s: float = DEFAULT_AGENT_TIMEOUT_S
    verifier_timeout_s: float | None = None
    verifier_env: Mapping[str, str] = field(default_factory=dict)
    # Below it the task stops after this step.
    min_reward: float | None = None
    healthcheck: Healthcheck | None = None
    artifacts: tuple[str, ...] = ()

    @property
    def folder(self) -> str:
        return f"steps/{self.name}"


@dataclass(frozen=True)
class Task:
    """A task folder as a case runs it. Paths are absolute on the machine that read it; the
    catalog records ``folder`` by its path in the project, so a worker finds its bundle's copy.
    """

    folder: str
    format: str  # HARBOR | TERMINAL_BENCH
    name: str
    # The image: built from ``dockerfile`` (relative to the folder) with ``context`` as its
    # build context, or ``docker_image`` used as given.
    dockerfile: str | None = None
    context: str = "."
    docker_image: str | None = None
    # FROM or docker_image name -> a local image to use instead (the tasks(images=...) map).
    images: Mapping[str, str] = field(default_factory=dict)
    workdir: str | None = None
    # The image build's own limit (None: the worker's default).
    build_timeout_s: float | None = None
    cpus: float | None = None
    memory_mb: int | None = None
    allow_internet: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    agent_user: str | None = None
    tests_script: str = HARBOR_TESTS_SCRIPT
    verifier_timeout_s: float = DEFAULT_VERIFIER_TIMEOUT_S
    verifier_env: Mapping[str, str] = field(default_factory=dict)
    verifier_user: str | None = None
    # How the verifier's result is read: "reward" (a reward file) or "pytest" (its output).
    parser: str = "reward"
    solution_script: str | None = None
    solution_env: Mapping[str, str] = field(default_factory=dict)
    reward_threshold: float = 1.0
    artifacts: tuple[str, ...] = ()
    # A multi-step task's steps, in order, run in the same container as turns of one
    # conversation, each verified before the next.
    steps: tuple[Step, ...] = ()
    # A compose task's other services, started on the trial's own network before the agent.
    services: tuple[Service, ...] = ()
    # The compose service that is the agent's container, reached under this name: Harbor's
    # ``main``, Terminal-Bench's ``client``.
    main_service: str = "main"

    def to_definition(self) -> dict[str, Any]:
        value = asdict(self)
        value["images"] = dict(sorted(self.images.items()))
        value["artifacts"] = list(self.artifacts)
        value["steps"] = [
            {**asdict(step), "artifacts": list(step.artifacts)} for step in self.steps
        ]
        if not self.steps:
            del value["steps"]  # so a task without steps keeps its version
        value["services"] = [asdict(service) for service in self.services]
        if not self.services:
            del value["services"]  # likewise
        if self.main_service == "main":
            del value["main_service"]  # likewise
        return value

    @classmethod
    def from_definition(cls, value: Mapping[str, Any]) -> Task:
        fields = {k: value[k] for k in cls.__dataclass_fields__ if k in value}
        fields["artifacts"] = tuple(fields.get("artifacts") or ())
        fields["steps"] = tuple(
            Step(
                **{
                    **step,
                    "artifacts": tuple(step.get("artifacts") or ()),
                    "healthcheck": Healthcheck(**step["healthcheck"])
                    if step.get("healthcheck")
                    else None,
                }
            )
            for step in fields.get("steps") or ()
        )
        fields["services"] = tuple(
            Service(
                **{
                    **service,
                    "healthcheck": tuple(service.get("healthcheck") or ()),
                    "command": tuple(service["command"])
                    if isinstance(service.get("command"), list)
                    else service.get("command"),
                }
            )
            for service in fields.get("services") or ()
        )
        return cls(**fields)

    @property
    def path(self) -> Path:
        return Path(self.folder)

    @property
    def compose_folder(self) -> Path:
        """The folder of the compose file, which its services' ``build`` folders are in."""
        return self.path / "environment" if self.format == HARBOR else self.path


def tasks(
    path: str | Path,
    *,
    images: Mapping[str, str] | None = None,
    include: str | Sequence[str] | None = None,
    reward_threshold: float | None = None,
) -> list[Case]:
    """The cases of every Harbor or Terminal-Bench 1 task folder under ``path`` (or of
    ``path`` itself when it is one task), in folder order.

    ``images`` maps a Dockerfile's ``FROM`` or a task's ``docker_image`` onto a local image
    (``{"ubuntu:24.04": "proctor-base:latest"}``); ``include`` keeps the tasks whose folder
    name or task name matches one of the names or globs; ``reward_threshold`` lowers the
    reward every task needs (a task's own ``reward_threshold`` wins). A relative ``path`` is
    taken relative to the calling file. Raises DefinitionError naming the file and the field
    of the first folder that is not a valid task."""
    base = Path(path).expanduser()
    if not base.is_absolute():
        caller = sys._getframe(1).f_globals.get("__file__")
        base = (Path(caller).resolve().parent if caller else Path.cwd()) / base
    base = base.resolve()
    if not base.is_dir():
        raise DefinitionError(f"tasks({str(path)!r}): {base} is not a folder")
    image_map = _image_map(images)
    patterns = [include] if isinstance(include, str) else list(include or [])
    folders = [base] if _task_format(base) else _task_folders(base)
    if not folders:
        raise DefinitionError(
            f"tasks({str(path)!r}): no task folder under {base} (a folder with task.toml or "
            "task.yaml)"
        )
    cases: list[Case] = []
    taken: dict[str, Path] = {}
    for folder in folders:
        task, variables, tags, agent_timeout_s = read_task(folder, image_map, reward_threshold)
        if patterns and not any(
            fnmatch.fnmatchcase(name, pattern)
            for pattern in patterns
            for name in (folder.name, task.name)
        ):
            continue
        handle = case_id(folder.name)
        if handle in taken:
            raise DefinitionError(
                f"tasks({str(path)!r}): {taken[handle]} and {folder} both make the case id "
                f"{handle!r}; rename one folder, or leave one out with include="
            )
        taken[handle] = folder
        cases.append(
            case(
                handle,
                name=task.name if task.name != handle else None,
                variables=variables,
                tags=tags,
                timeout_ms=int(agent_timeout_s * 1000),
                max_turns=1,
                task=task,
            )
        )
    if patterns and not cases:
        raise DefinitionError(
            f"tasks({str(path)!r}): include={include!r} matches none of its "
            f"{len(folders)} task folders"
        )
    return cases


def case_id(name: str) -> str:
    """A folder name made a case id: lowercase words joined by single hyphens."""
    text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:ID_MAX].rstrip("-") or "task"


def _image_map(images: Mapping[str, str] | None) -> dict[str, str]:
    if images is None:
        return {}
    if not isinstance(images, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and k and v for k, v in images.items()
    ):
        raise DefinitionError(
            'tasks(images=...) maps image names to local images, like {"ubuntu:24.04": '
            f'"proctor-base:latest"}} (got {images!r:.80})'
        )
    return dict(images)


def _task_format(folder: Path) -> str | None:
    if (folder / "task.toml").is_file():
        return HARBOR
    if (folder / "task.yaml").is_file():
        return TERMINAL_BENCH
    return None


def _task_folders(base: Path) -> list[Path]:
    """Task folders under ``base``, not looking inside a task (its ``steps/`` or ``tests/``)."""
    found: list[Path] = []
    for child in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if _task_format(child):
            found.append(child)
        else:
            found.extend(_task_folders(child))
    return found


class _Fields:
    """Typed reads of one task file's tables, each mistake one line naming the file and field."""

    def __init__(self, file: Path, data: Mapping[str, Any]) -> None:
        self.file = file
        self.data = data

    def fail(self, key: str, wanted: str, value: Any) -> DefinitionError:
        return DefinitionError(f"{self.file}: {key} must be {wanted} (got {value!r:.80})")

    def table(self, key: str) -> Mapping[str, Any]:
        value: Any = self.data
        for part in key.split("."):
            value = value.get(part, {}) if isinstance(value, Mapping) else None
            if not isinstance(value, Mapping):
                raise self.fail(f"[{key}]", "a table", value)
        return value

    def get(self, key: str) -> Any:
        table, _, name = key.rpartition(".")
        return (self.table(table) if table else self.data).get(name)

    def number(self, key: str, *, positive: bool = True) -> float | None:
        value = self.get(key)
        if value is None:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or (positive and value <= 0)
        ):
            raise self.fail(key, "a positive number" if positive else "a number", value)
        return float(value)

    def text(self, key: str) -> str | None:
        value = self.get(key)
        if value is not None and not isinstance(value, str):
            raise self.fail(key, "text", value)
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(key, "true or false", value)
        return value

    def env(self, key: str) -> dict[str, str]:
        value = self.get(key) if "." in key else self.table(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise self.fail(key, "a table of names to text", value)
        if not all(isinstance(v, str | int | float | bool) for v in value.values()):
            raise self.fail(key, "a table of names to text", value)
        return {k: str(v) for k, v in value.items()}

    def texts(self, key: str) -> tuple[str, ...]:
        value = self.get(key)
        if value is None:
            return ()
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, "a list of text", value)
        return tuple(value)


def read_task(
    folder: Path, images: Mapping[str, str], reward_threshold: float | None = None
) -> tuple[Task, dict[str, str], tuple[str, ...], float]:
    """The task of one folder, its variables, its tags and its agent's limit in seconds.
    Raises DefinitionError naming the file and the field."""
    if _task_format(folder) == HARBOR:
        return _read_harbor(folder, images, reward_threshold)
    return _read_terminal_bench(folder, images, reward_threshold)


def _parsed(file: Path) -> Mapping[str, Any]:
    """The table a TOML or YAML task file holds (by its suffix)."""
    # Imported here, not at the top: ``proctor`` is also the runner kit that agents import with
    # a sandbox's own python3, which may lack PyYAML (or tomllib, before Python 3.11).
    import tomllib

    import yaml

    parse = tomllib.loads if file.suffix == ".toml" else yaml.safe_load
    try:
        data = parse(file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DefinitionError(f"{file}: not valid {file.suffix[1:].upper()}: {first}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DefinitionError(f"{file}: cannot be read ({exc})") from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise DefinitionError(f"{file}: must hold a table of settings (got {type(data).__name__})")
    return data


def _tags(fields: _Fields, table: str) -> tuple[str, ...]:
    """Difficulty, category and tags of the metadata, as case tags."""
    prefix = f"{table}." if table else ""
    tags: list[str] = []
    for key in ("difficulty", "category"):
        value = fields.get(prefix + key)
        if value is not None:
            if not isinstance(value, str | int | float):
                raise fields.fail(prefix + key, "text", value)
            tags.append(f"{key}:{value}")
    tags.extend(fields.texts(prefix + "tags"))
    return tuple(dict.fromkeys(tags))


def _threshold(fields: _Fields, key: str, suite_level: float | None) -> float:
    own = fields.number(key, positive=False)
    value = own if own is not None else suite_level
    if value is None:
        return 1.0
    if not 0 <= value <= 1:
        raise fields.fail(key, "a number from 0 to 1", value)
    return float(value)


def _instruction(file: Path) -> str:
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DefinitionError(f"{file}: missing (the instruction the agent is given)") from None
    if not text.strip():
        raise DefinitionError(f"{file}: is empty (the instruction the agent is given)")
    return text


def _read_harbor(
    folder: Path, images: Mapping[str, str], reward_threshold: float | None
) -> tuple[Task, dict[str, str], tuple[str, ...], float]:
    file = folder / "task.toml"
    fields = _Fields(file, _parsed(file))
    steps = _steps(folder, fields)
    services, main_env = _services(folder / "environment")
    instruction = steps[0].instruction if steps else _instruction(folder / "instruction.md")
    docker_image = fields.text("environment.docker_image")
    dockerfile = "environment/Dockerfile"
    if docker_image is None and not (folder / dockerfile).is_file():
        raise DefinitionError(
            f"{file}: [environment] docker_image is not set and {folder / dockerfile} is "
            "missing: the task has no image"
        )
    for step in steps or (None,):
        where = folder / step.folder if step else folder
        if (
            not (where / HARBOR_TESTS_SCRIPT).is_file()
            and not (folder / HARBOR_TESTS_SCRIPT).is_file()
        ):
            raise DefinitionError(f"{where / HARBOR_TESTS_SCRIPT}: missing (the task's verifier)")
    memory = fields.number("environment.memory_mb")
    if memory is None and fields.get("environment.memory") is not None:
        memory = _older_size(fields, "environment.memory")
    name = fields.text("task.name") or folder.name
    solution = folder / "solution" / "solve.sh"
    task = Task(
        folder=str(folder),
        format=HARBOR,
        name=name,
        dockerfile=None if docker_image else dockerfile,
        context="environment",
        docker_image=docker_image,
        images=dict(images),
        workdir=fields.text("environment.workdir"),
        build_timeout_s=fields.number("environment.build_timeout_sec"),
        cpus=fields.number("environment.cpus"),
        memory_mb=int(memory) if memory else None,
        allow_internet=fields.flag("environment.allow_internet", True),
        env={**main_env, **fields.env("environment.env")},
        agent_user=_user(fields, "agent.user"),
        tests_script=HARBOR_TESTS_SCRIPT,
        verifier_timeout_s=fields.number("verifier.timeout_sec") or DEFAULT_VERIFIER_TIMEOUT_S,
        verifier_env=fields.env("verifier.env"),
        verifier_user=_user(fields, "verifier.user"),
        parser="reward",
        solution_script="solution/solve.sh" if solution.is_file() else None,
        solution_env=fields.env("solution.env"),
        reward_threshold=_threshold(fields, "verifier.reward_threshold", reward_threshold),
        artifacts=fields.texts("artifacts"),
        steps=steps,
        services=services,
    )
    agent_timeout = fields.number("agent.timeout_sec") or DEFAULT_AGENT_TIMEOUT_S
    if steps:  # the trial's agent budget holds every step's own limit
        agent_timeout = sum(step.agent_timeout_s for step in steps)
    tags = (*_tags(fields, "metadata"), *fields.texts("task.keywords"))
    return task, {"instruction": instruction}, tuple(dict.fromkeys(tags)), agent_timeout


COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml")
# The compose keys a service may have that Proctor applies; others are refused by name, so a
# task never runs without something it asked for.
SERVICE_KEYS = frozenset(
    {"build", "image", "environment", "command", "healthcheck", "depends_on", "expose"}
)
MAIN_KEYS = frozenset({"build", "image", "depends_on", "environment"})


def _services(environment: Path) -> tuple[tuple[Service, ...], dict[str, str]]:
    """The services of a Harbor task's compose file beside ``main``, and ``main``'s own
    environment; nothing without a compose file."""
    file = _compose_file(environment)
    if file is None:
        return (), {}
    fields = _Fields(file, _parsed(file))
    services, main = _compose_services(fields, environment, "main", MAIN_KEYS)
    return services, _compose_env(fields, "main", main.get("environment"))


def _compose_file(folder: Path) -> Path | None:
    return next((folder / n for n in COMPOSE_FILES if (folder / n).is_file()), None)


def _compose_env(fields: _Fields, service: str, value: Any) -> dict[str, str]:
    """A compose service's ``environment``: a table, or a list of NAME=value; anything else is
    one line naming the file and the service."""
    if value is None:
        return {}
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in value)
    if isinstance(value, Mapping):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    raise fields.fail(f"services.{service}.environment", "a table or a list of NAME=value", value)


def _compose_services(
    fields: _Fields, folder: Path, main_name: str, main_keys: frozenset[str]
) -> tuple[tuple[Service, ...], Mapping[str, Any]]:
    """The services of a compose file beside the agent's container (the service
    ``main_name``, its keys checked against ``main_keys``), and that container's own table.
    Harbor's and Terminal-Bench's compose files share it; ``build`` folders are relative to
    ``folder``."""
    listed = fields.get("services")
    if not isinstance(listed, Mapping) or not listed:
        raise fields.fail("services", "a table of services", listed)
    main = listed.get(main_name) or {}
    if not isinstance(main, Mapping):
        raise fields.fail(f"services.{main_name}", "a table", main)
    if unknown := sorted(set(main) - main_keys):
        raise fields.fail(
            f"services.{main_name}.{unknown[0]}",
            "left out (Proctor does not apply it)",
            main[unknown[0]],
        )
    waits = main.get("depends_on") or {}
    if isinstance(waits, list):
        waits = {name: {"condition": "service_started"} for name in waits}
    if not isinstance(waits, Mapping):
        raise fields.fail(f"services.{main_name}.depends_on", "a list or table of services", waits)
    services = []
    for name, spec in listed.items():
        if name == main_name:
            continue
        where = f"services.{name}"
        if not isinstance(spec, Mapping):
            raise fields.fail(where, "a table", spec)
        if unknown := sorted(set(spec) - SERVICE_KEYS):
            raise fields.fail(
                f"{where}.{unknown[0]}", "left out (Proctor does not apply it)", spec[unknown[0]]
            )
        own = _Fields(fields.file, spec)
        build, dockerfile = spec.get("build"), "Dockerfile"
        if isinstance(build, Mapping):
            build, dockerfile = build.get("context", "."), build.get("dockerfile", "Dockerfile")
        if build is not None and (not isinstance(build, str) or not (folder / build).is_dir()):
            raise fields.fail(f"{where}.build", "a folder beside the compose file", build)
        image = own.text("image")
        if build is None and not image:
            raise fields.fail(where, "a service with build or image", dict(spec))
        env = _compose_env(fields, name, spec.get("environment"))
        command = spec.get("command")
        if command is not None and not (
            isinstance(command, str)
            or (isinstance(command, list) and all(isinstance(c, str) for c in command))
        ):
            raise fields.fail(f"{where}.command", "text or a list of text", command)
        check = spec.get("healthcheck") or {}
        test = check.get("test", ()) if isinstance(check, Mapping) else None
        if isinstance(test, str):
            test = ["CMD-SHELL", test]
        if test is None or not all(isinstance(t, str) for t in test):
            raise fields.fail(f"{where}.healthcheck.test", "a command", test)
        condition = waits.get(name, {})
        condition = (
            condition.get("condition", "service_started")
            if isinstance(condition, Mapping)
            else None
        )
        if name in waits and condition not in ("service_started", "service_healthy"):
            raise fields.fail(
                f"services.{main_name}.depends_on.{name}.condition",
                "service_started or service_healthy",
                condition,
            )
        if condition == "service_healthy" and not test:
            raise fields.fail(
                f"{where}.healthcheck", f"set, as {main_name} waits for it to be healthy", None
            )
        services.append(
            Service(
                name=str(name),
                build=build,
                dockerfile=str(dockerfile),
                image=image,
                environment=env,
                command=tuple(command) if isinstance(command, list) else command,
                healthcheck=tuple(test),
                interval_s=_duration(check.get("interval"), 1.0),
                timeout_s=_duration(check.get("timeout"), 10.0),
                retries=int(check.get("retries", 30)),
                start_period_s=_duration(check.get("start_period"), 0.0),
                main_waits_for=str(condition) if name in waits else "",
            )
        )
    if missing := sorted(set(waits) - {s.name for s in services}):
        raise fields.fail(
            f"services.{main_name}.depends_on.{missing[0]}", "a service of the file", None
        )
    return tuple(services), main


def _duration(value: Any, default: float) -> float:
    """Compose's "1s", "500ms", "1m30s" or a number of seconds."""
    if value is None:
        return default
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    total, text = 0.0, str(value).strip()
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|us|s|m|h)", text):
        total += float(number) * {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}[unit]
    return total or default


def _steps(folder: Path, fields: _Fields) -> tuple[Step, ...]:
    """The ``[[steps]]`` of a task file, each with its folder's instruction."""
    listed = fields.get("steps")
    if listed is None:
        return ()
    if not isinstance(listed, list) or not listed or not all(isinstance(s, dict) for s in listed):
        raise fields.fail("[[steps]]", "a list of tables, each with a name", listed)
    steps: list[Step] = []
    for position, table in enumerate(listed, start=1):
        own = _Fields(fields.file, table)
        name = own.text("name")
        where = f"[[steps]] {position}"
        if not name or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise fields.fail(f"{where} name", "a folder name under steps/", name)
        if any(step.name == name for step in steps):
            raise fields.fail(f"{where} name", "a name no other step has", name)
        check = None
        if own.get("healthcheck") is not None:
            command = own.text("healthcheck.command")
            if not command:
                raise fields.fail(f"{where} healthcheck.command", "a shell command", command)
            retries = own.number("healthcheck.retries", positive=False)
            check = Healthcheck(
                command=command,
                interval_s=own.number("healthcheck.interval_sec") or 1.0,
                timeout_s=own.number("healthcheck.timeout_sec") or 30.0,
                retries=int(retries) if retries is not None else 3,
            )
        min_reward = own.number("min_reward", positive=False)
        steps.append(
            Step(
                name=name,
                instruction=_instruction(folder / "steps" / name / "instruction.md"),
                agent_timeout_s=own.number("agent.timeout_sec") or DEFAULT_AGENT_TIMEOUT_S,
                verifier_timeout_s=own.number("verifier.timeout_sec"),
                verifier_env=own.env("verifier.env"),
                min_reward=min_reward,
                healthcheck=check,
                artifacts=own.texts("artifacts"),
            )
        )
    return tuple(steps)


def _older_size(fields: _Fields, key: str) -> float:
    """``memory = "2G"`` of older task files, in megabytes."""
    value = fields.get(key)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)[bB]?\s*", str(value))
    if not match:
        raise fields.fail(key, 'a size like "2G" or "512M"', value)
    scale = {"": 1 / (1 << 20), "k": 1 / 1024, "m": 1, "g": 1024}[match.group(2).lower()]
    return float(match.group(1)) * scale


def _user(fields: _Fields, key: str) -> str | None:
    value = fields.get(key)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+)?", value):
        raise fields.fail(key, "a user name or id", value)
    return value


def _read_terminal_bench(
    folder: Path, images: Mapping[str, str], reward_threshold: float | None
) -> tuple[Task, dict[str, str], tuple[str, ...], float]:
    file = folder / "task.yaml"
    fields = _Fields(file, _parsed(file))
    instruction = fields.text("instruction")
    if not instruction or not instruction.strip():
        raise DefinitionError(f"{file}: instruction is required (the text the agent is given)")
    compose = _terminal_bench_compose(folder)
    if compose is None and not (folder / "Dockerfile").is_file():
        raise DefinitionError(
            f"{folder / 'Dockerfile'}: missing (the task's image), and the folder has no "
            "docker-compose.yaml"
        )
    if not (folder / TERMINAL_BENCH_TESTS_SCRIPT).is_file():
        raise DefinitionError(
            f"{folder / TERMINAL_BENCH_TESTS_SCRIPT}: missing (the task's verifier)"
        )
    parser = fields.text("parser_name") or "pytest"
    if parser != "pytest":
        raise fields.fail("parser_name", '"pytest" (the only parser Proctor reads)', parser)
    task = Task(
        folder=str(folder),
        format=TERMINAL_BENCH,
        name=folder.name,
        dockerfile=compose.dockerfile if compose else "Dockerfile",
        context=compose.context if compose else ".",
        docker_image=compose.docker_image if compose else None,
        images=dict(images),
        env=compose.env if compose else {},
        services=compose.services if compose else (),
        main_service=compose.main_service if compose else "main",
        tests_script=TERMINAL_BENCH_TESTS_SCRIPT,
        verifier_timeout_s=fields.number("max_test_timeout_sec") or DEFAULT_VERIFIER_TIMEOUT_S,
        parser="pytest",
        solution_script="solution.sh" if (folder / "solution.sh").is_file() else None,
        reward_threshold=_threshold(fields, "reward_threshold", reward_threshold),
    )
    agent_timeout = fields.number("max_agent_timeout_sec") or DEFAULT_AGENT_TIMEOUT_S
    return task, {"instruction": instruction}, _tags(fields, ""), agent_timeout


# What Terminal-Bench's own harness sets for a task's compose file, and what Proctor puts in
# its place: the host-side paths name the container's own folders, as Proctor mounts nothing
# and reads the logs out of the container itself.
TERMINAL_BENCH_COMPOSE_VALUES = {
    "T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME": "proctor-task-client",
    "T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME": "client",
    "T_BENCH_TASK_DOCKER_NAME_PREFIX": "proctor-task",
    "T_BENCH_TEST_DIR": "/tests",
    "T_BENCH_TASK_LOGS_PATH": "/logs",
    "T_BENCH_CONTAINER_LOGS_PATH": "/logs",
    "T_BENCH_TASK_AGENT_LOGS_PATH": "/logs/agent",
    "T_BENCH_CONTAINER_AGENT_LOGS_PATH": "/logs/agent",
}
# The client may carry what Terminal-Bench's harness gives it: a container name and the tag of
# the image it builds (Proctor names both itself; the client is reached as ``client``), a
# command that only keeps it running (Proctor's does that), and the mounts of its log folders
# (the container's own here).
CLIENT_KEYS = MAIN_KEYS | {"container_name", "command", "volumes"}
CLIENT_VOLUMES = frozenset(
    {
        "${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}",
        "${T_BENCH_TASK_AGENT_LOGS_PATH}:${T_BENCH_CONTAINER_AGENT_LOGS_PATH}",
    }
)
_VARIABLE = re.compile(r"\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|([A-Za-z_]\w*))")


@dataclass(frozen=True)
class _Client:
    """A Terminal-Bench compose file's agent container and the services beside it."""

    main_service: str
    dockerfile: str | None
    context: str
    docker_image: str | None
    env: dict[str, str]
    services: tuple[Service, ...]


def _terminal_bench_compose(folder: Path) -> _Client | None:
    """The compose file of a Terminal-Bench task, read like a Harbor task's with ``client``
    (or ``main``) as the agent's container and Terminal-Bench's variables filled in; None
    without one."""
    file = _compose_file(folder)
    if file is None:
        return None
    raw = _parsed(file)
    listed = raw.get("services")
    if not isinstance(listed, Mapping):
        listed = {}
    name = next((n for n in ("client", "main") if n in listed), "")
    if not name:
        raise DefinitionError(
            f"{file}: services.client must be set (the agent's container; Terminal-Bench names "
            "it client)"
        )
    client = listed[name] if isinstance(listed[name], Mapping) else {}
    volumes = client.get("volumes") or []
    for volume in volumes if isinstance(volumes, list) else [volumes]:
        if not isinstance(volume, str) or volume not in CLIENT_VOLUMES:
            raise _Fields(file, raw).fail(
                f"services.{name}.volumes",
                "left out (Proctor mounts only the log folders, which are the container's own)",
                volume,
            )
    fields = _Fields(file, _filled(raw, file))
    services, main = _compose_services(fields, folder, name, CLIENT_KEYS)
    command = main.get("command")
    shown = (
        " ".join(map(str, command))
        if isinstance(command, list)
        else str(command or "sleep infinity")
    )
    if not re.fullmatch(r"(sh -c )?sleep infinity", shown.strip()):
        raise fields.fail(
            f"services.{name}.command",
            'left out, or "sleep infinity" (Proctor runs the agent\'s container its own way)',
            command,
        )
    build = main.get("build")
    dockerfile: str | None = None
    context = "."
    if build is not None:
        if isinstance(build, str):
            build = {"context": build}
        if not isinstance(build, Mapping) or set(build) - {"context", "dockerfile"}:
            raise fields.fail(f"services.{name}.build", "a folder or context and dockerfile", build)
        context = str(build.get("context") or ".")
        path = (folder / context / str(build.get("dockerfile") or "Dockerfile")).resolve()
        if not path.is_file() or not path.is_relative_to(folder.resolve()):
            raise fields.fail(f"services.{name}.build", "a Dockerfile in the task's folder", build)
        dockerfile = path.relative_to(folder.resolve()).as_posix()
        context = (folder / context).resolve().relative_to(folder.resolve()).as_posix()
    image = None if build is not None else _Fields(file, main).text("image")
    if build is None and not image:
        raise fields.fail(f"services.{name}", "a service with build or image", dict(main))
    return _Client(
        main_service=name,
        dockerfile=dockerfile,
        context=context,
        docker_image=image,
        env=_compose_env(fields, name, main.get("environment")),
        services=services,
    )


def _filled(value: Any, file: Path) -> Any:
    """``value`` with Terminal-Bench's compose variables filled in (``${NAME}``,
    ``${NAME:-default}``, ``$NAME``; ``$$`` is a dollar sign). A variable Proctor does not
    set and that has no default is refused by name."""
    if isinstance(value, Mapping):
        return {k: _filled(v, file) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, file) for v in value]
    if not isinstance(value, str):
        return value

    def fill(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1) or match.group(4)
        if name in TERMINAL_BENCH_COMPOSE_VALUES:
            return TERMINAL_BENCH_COMPOSE_VALUES[name]
        if match.group(2) is not None:
            return match.group(3)
        raise DefinitionError(
            f"{file}: uses ${{{name}}}, which Proctor does not set (it sets "
            f"{', '.join(sorted(TERMINAL_BENCH_COMPOSE_VALUES))}); give it a default, "
            f"${{{name}:-value}}"
        )

    return _VARIABLE.sub(fill, value)
