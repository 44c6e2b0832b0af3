"""How a sandbox reaches the trial's mocks: what it adds to each process's environment, the
folder it binds in, and (network off) the bridge each process runs under.

The trial's mock folder sits in the sandbox's own root, outside the workspace; it holds the
cli shims (``bin/``), the mocks' unix sockets, the bridge and the MCP stdio script. Sandboxes
bind it read-only at the same path, so every path in it reads the same inside and out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class McpEndpoint:
    """One MCP mock as a harness writes it into an agent's configuration."""

    name: str
    url: str  # streamable HTTP
    stdio: tuple[
        str, ...
    ]  # the command of the stdio server, first the script (run it with python3)

    def stdio_command(self, python: str = "python3") -> list[str]:
        return [python, *self.stdio]


@dataclass(frozen=True)
class MockAccess:
    folder: str
    bin_dir: str
    env: dict[str, str]
    # (port, unix socket) for each mock: what the bridge listens on and forwards to.
    routes: tuple[tuple[int, str], ...]
    bridge: str
    mcp: tuple[McpEndpoint, ...] = field(default_factory=tuple)
    # The mocks' host names (``host=``) and the hosts file naming them, which a sandbox shows
    # as its /etc/hosts; None when no mock has a host name.
    hosts: tuple[str, ...] = ()
    hosts_file: str | None = None
    # The trial's OTLP/HTTP receiver (``http://127.0.0.1:<port>``, no path), where a harness
    # points an agent CLI that exports OpenTelemetry; None when the trial has none.
    otlp_url: str | None = None

    def apply_env(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` with the mocks' variables and the shims first on PATH."""
        merged = {**env, **self.env}
        path = [p for p in (env.get("PATH") or "").split(os.pathsep) if p and p != self.bin_dir]
        merged["PATH"] = os.pathsep.join([self.bin_dir, *path])
        return merged

    def bridged(self, argv: Sequence[str], python: str) -> list[str]:
        """``argv`` run under the bridge, for a sandbox whose network is off."""
        if not self.routes:
            return list(argv)
        routes = [f"{port}={path}" for port, path in self.routes]
        return [python, self.bridge, *routes, "--", *argv]
