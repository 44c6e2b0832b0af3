"""Sandboxes by name. A new kind is one module and one line here."""

from __future__ import annotations

from collections.abc import Callable

from proctor.definitions import Variant
from runner.sandboxes.base import PathEscapesWorkspace, ProcessResult, Sandbox, SandboxError
from runner.sandboxes.bwrap import BwrapSandbox
from runner.sandboxes.docker import DockerSandbox
from runner.sandboxes.local import LocalSandbox

# The kinds by name, for what they declare (the options they read) before any is built.
SANDBOX_KINDS: dict[str, type[Sandbox]] = {
    "local": LocalSandbox,
    "bwrap": BwrapSandbox,
    "docker": DockerSandbox,
}
# Each kind is built from the variant it runs (network allowance, image, limits in options).
SANDBOXES: dict[str, Callable[[Variant], Sandbox]] = {
    "local": LocalSandbox.for_variant,
    "bwrap": BwrapSandbox.for_variant,
    "docker": DockerSandbox.for_variant,
}


def create_sandbox(variant: Variant) -> Sandbox:
    try:
        factory = SANDBOXES[variant.sandbox]
    except KeyError:
        known = ", ".join(sorted(SANDBOXES))
        raise SandboxError(f"unknown sandbox {variant.sandbox!r} (known: {known})") from None
    return factory(variant)


__all__ = [
    "SANDBOXES",
    "SANDBOX_KINDS",
    "PathEscapesWorkspace",
    "ProcessResult",
    "Sandbox",
    "SandboxError",
    "create_sandbox",
]
