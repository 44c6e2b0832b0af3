"""Sandboxes by name. A new kind is one module and one line here."""

from __future__ import annotations

from proctor.definitions import Variant
from runner.sandboxes.base import PathEscapesWorkspace, ProcessResult, Sandbox, SandboxError
from runner.sandboxes.bwrap import BwrapSandbox
from runner.sandboxes.docker import DockerSandbox
from runner.sandboxes.local import LocalSandbox

# The kinds by name: what each declares (the options it reads) is read before any is built,
# and each is built from the variant it runs (network allowance, image, limits in options).
SANDBOX_KINDS: dict[str, type[Sandbox]] = {
    "local": LocalSandbox,
    "bwrap": BwrapSandbox,
    "docker": DockerSandbox,
}


def create_sandbox(variant: Variant) -> Sandbox:
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
