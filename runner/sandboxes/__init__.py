"""Sandboxes by name: the built-in kinds (a new one is one module and one line here), then
those other packages install through the ``proctor.sandboxes`` entry point group
(``runner.sandboxes.registry``, docs/sandboxes.md)."""

from __future__ import annotations

from typing import Any

from proctor.definitions import Variant
from proctor.tasks import Task
from runner.sandboxes.base import PathEscapesWorkspace, ProcessResult, Sandbox, SandboxError
from runner.sandboxes.bwrap import BwrapSandbox
from runner.sandboxes.docker import DockerSandbox
from runner.sandboxes.e2b_remote import E2BSandbox
from runner.sandboxes.local import LocalSandbox
from runner.sandboxes.registry import SandboxKinds
from runner.sandboxes.task_container import TaskSandbox

# The kinds by name: what each declares (the options it reads) is read before any is built,
# and each is built from the variant it runs (network allowance, image, limits in options).
# The plug-ins come after the built-in kinds, read on first need (a plug-in's module may
# import this package for the interface).
SANDBOX_KINDS = SandboxKinds(
    {
        "local": LocalSandbox,
        "bwrap": BwrapSandbox,
        "docker": DockerSandbox,
        "e2b": E2BSandbox,
    }
)
BUILT_IN_KINDS = frozenset(SANDBOX_KINDS.built_in)


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
        if variant.sandbox in SANDBOX_KINDS.broken:
            raise SandboxError(SANDBOX_KINDS.broken[variant.sandbox]) from None
        known = ", ".join(sorted(SANDBOX_KINDS))
        raise SandboxError(f"unknown sandbox {variant.sandbox!r} (known: {known})") from None
    return kind.for_variant(variant)


__all__ = [
    "BUILT_IN_KINDS",
    "SANDBOX_KINDS",
    "PathEscapesWorkspace",
    "ProcessResult",
    "Sandbox",
    "SandboxError",
    "create_sandbox",
]
