"""A compose task's other services: started on the trial's own network before the agent's
container, and torn down with the trial, whatever happened.

Each trial gets a network of its own (internal, so without a way out, unless the variant
allows the network and the task allows the internet). Every service joins it under its name
and the agent's container under its service's name (Harbor's ``main``, Terminal-Bench's
``client``), so the agent reaches ``http://api:8000`` as the task's compose file says. The
agent's container starts once the services it ``depends_on`` are started, or healthy for
``condition: service_healthy``; a service that exits or turns unhealthy first errors the trial
in one line naming it. The watchdog removes the containers of
a Proctor that died.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from proctor.tasks import Service, Task
from runner.sandboxes.base import SandboxError
from runner.sandboxes.containment import watch_container
from runner.sandboxes.engine import EngineError, engine_errors, unix_socket_path
from runner.sandboxes.task_images import service_image

if TYPE_CHECKING:
    from docker import DockerClient

LABEL = "proctor.sandbox"
NANOSECONDS = 1_000_000_000
# The longest a service may take to be started or healthy, whatever its healthcheck says.
LONGEST_WAIT_S = 300.0


class TaskServices:
    """The network and the service containers of one trial."""

    def __init__(self, engine: DockerClient, task: Task) -> None:
        self.engine = engine
        self.task = task
        self.network = f"proctor-trial-{secrets.token_hex(6)}"
        self.containers: dict[str, str] = {}
        self.network_made = False

    def start(self, *, internal: bool, folder: str, log: Callable[[str], None] | None) -> None:
        """Build (or find) every service's image, make the network, start the services and
        wait for what ``main`` waits for. Raises SandboxError; ``stop`` cleans up either way."""
        images = {s.name: service_image(self.task, s, self.engine, log) for s in self.task.services}
        try:
            with engine_errors():
                self.engine.api.create_network(
                    self.network,
                    internal=internal,
                    check_duplicate=True,
                    labels={LABEL: "task-network", f"{LABEL}.folder": folder},
                )
        except EngineError as exc:
            raise SandboxError(
                f"task {self.task.name}: the trial's network could not be made: {exc}"
            ) from exc
        self.network_made = True
        for service in self.task.services:
            self.containers[service.name] = self._start(service, images[service.name], folder)
        for service in self.task.services:
            if service.main_waits_for:
                self._wait(service)

    def _start(self, service: Service, image: str, folder: str) -> str:
        api = self.engine.api
        create: dict[str, Any] = dict(
            environment=[f"{k}={v}" for k, v in service.environment.items()],
            labels={LABEL: "task-service", f"{LABEL}.folder": folder},
            hostname=service.name,
            name=f"{self.network}-{service.name}",
        )
        if service.command is not None:
            create["command"] = (
                ["sh", "-c", service.command]
                if isinstance(service.command, str)
                else list(service.command)
            )
        if service.healthcheck:
            create["healthcheck"] = {
                "test": list(service.healthcheck),
                "interval": int(service.interval_s * NANOSECONDS),
                "timeout": int(service.timeout_s * NANOSECONDS),
                "retries": service.retries,
                "start_period": int(service.start_period_s * NANOSECONDS),
            }
        try:
            with engine_errors():
                created = api.create_container(
                    image,
                    host_config=api.create_host_config(network_mode=self.network, init=True),
                    networking_config=api.create_networking_config(
                        {self.network: api.create_endpoint_config(aliases=[service.name])}
                    ),
                    **create,
                )
                container = str(created["Id"])
                self.containers[service.name] = container  # removed by stop from here on
                if socket_path := unix_socket_path(self.engine):
                    watch_container(socket_path, container)
                api.start(container)
        except EngineError as exc:
            raise SandboxError(
                f"task {self.task.name}: service {service.name} could not start: {exc}"
            ) from exc
        return container

    def _wait(self, service: Service) -> None:
        healthy = service.main_waits_for == "service_healthy"
        patience = service.start_period_s + (service.interval_s + service.timeout_s) * (
            service.retries + 1
        )
        deadline = time.monotonic() + min(max(patience, 5.0), LONGEST_WAIT_S)
        container = self.containers[service.name]
        while True:
            with engine_errors():
                state = self.engine.api.inspect_container(container)["State"]
            if not state.get("Running"):
                raise SandboxError(
                    f"task {self.task.name}: service {service.name} exited "
                    f"({state.get('ExitCode')}) before the agent could start"
                )
            health = (state.get("Health") or {}).get("Status")
            if not healthy or health == "healthy":
                return
            if health == "unhealthy":
                raise SandboxError(
                    f"task {self.task.name}: service {service.name} is unhealthy, and "
                    f"{self.task.main_service} waits for it to be healthy"
                )
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"task {self.task.name}: service {service.name} was not healthy within "
                    f"{min(patience, LONGEST_WAIT_S):g} s"
                )
            time.sleep(min(0.2, service.interval_s))

    def stop(self, main_container: str | None) -> None:
        """Remove every service container and the network (``main`` is disconnected first,
        its own removal being the docker sandbox's). Never raises."""
        api = self.engine.api
        socket_path = unix_socket_path(self.engine)
        for container in self.containers.values():
            with contextlib.suppress(EngineError), engine_errors():
                api.remove_container(container, force=True, v=True)
            if socket_path:
                with contextlib.suppress(Exception):
                    watch_container(socket_path, container, done=True)
        self.containers = {}
        if self.network_made:
            if main_container is not None:
                with contextlib.suppress(EngineError), engine_errors():
                    api.disconnect_container_from_network(main_container, self.network, force=True)
            with contextlib.suppress(EngineError), engine_errors():
                api.remove_network(self.network)
            self.network_made = False
