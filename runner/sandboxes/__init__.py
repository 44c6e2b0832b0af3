"""Sandboxes by name. A new kind is one module and one line here."""

from __future__ import annotations

from collections.abc import Callable

from runner.sandboxes.base import PathEscapesWorkspace, ProcessResult, Sandbox, SandboxError
from runner.sandboxes.local import LocalSandbox

SANDBOXES: dict[str, Callable[..., Sandbox]] = {
    "local": LocalSandbox,
}


def create_sandbox(kind: str, **options: object) -> Sandbox:
    try:
        factory = SANDBOXES[kind]
    except KeyError:
        raise SandboxError(f"unknown sandbox {kind!r} (known: {', '.join(sorted(SANDBOXES))})") from None
    return factory(**options)


__all__ = ["SANDBOXES", "PathEscapesWorkspace", "ProcessResult", "Sandbox", "SandboxError", "create_sandbox"]
