"""Sandboxes by name. A new kind is one module and one line here."""

from __future__ import annotations

from typing import Any

from proctor.definitions import Variant
from proctor.tasks import Task
from runner.sandboxes.base import PathEscapesWorkspace, ProcessResult, Sandbox, SandboxError
from runner.sandboxes.bwrap import BwrapSandbox
from runner.sandboxes.docker import DockerSandbox
from runner.sandboxes.local import LocalSandbox
from runner.sandboxes.task_container import TaskSandbox

# The kinds by name: what each declares (the options it reads) is read before any is built,
# and each is built from the variant it runs (network allowance, image, limits in options).
SANDBOX_KINDS: dict[str, type[Sandbox]] = {
    "local": LocalSandbox,
    "bwrap": BwrapSandbox,
    "docker": DockerSandbox,
}


def create_sandbox(variant: Variant, task: Task | None = None, log: Any = None) -> Sandbox:
    """The sandbox of one trial of ``variant``; for a task case, a container from its task's
    image (built first when needed: ``log`` gets the build's lines)."""
    if task is not None:
        if variant.sandbox != "docker":
            raise SandboxError(
                f"variant {variant.name}: a task case runs in its task's image, which the "
                f"{variant.sandbox} sandbox cannot hold"
            )
        return TaskSandbox.for_task(variant, task, log)
    try:
        kind = SANDBOX_KINDS[variant.sandbox]
    except KeyError:
        known = ", ".join(sorted(SANDBOX_KINDS))
        raise SandboxError(f"unknown sandbox {variant.sandbox!r} (known: {known})") from None
    return kind.for_variant(variant)


__all__ = [
    "SANDBOX_KINDS",
    "PathEscapesWorkspace",
    "ProcessResult",
    "Sandbox",
    "SandboxError",
    "create_sandbox",
]
