"""The trial's MCP mocks as each agent CLI's configuration takes them.

Claude Code and OpenCode reach the streamable HTTP endpoint; Codex and Gemini launch the stdio
server (``mcp_stdio.py`` under the sandbox's ``python3``), the form every version of theirs
reads. Either way the calls land in the same mock, and inside a sandbox with the network off
the bridge carries them (runner.sandboxes.mock_access).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runner.sandboxes.mock_access import McpEndpoint


def endpoints(sandbox: Any) -> tuple[McpEndpoint, ...]:
    access = getattr(sandbox, "mocks", None)
    return access.mcp if access is not None else ()


def otlp_url(sandbox: Any) -> str | None:
    """The trial's OTLP/HTTP receiver (no path), None when the trial has none."""
    access = getattr(sandbox, "mocks", None)
    return access.otlp_url if access is not None else None


def shims_first(sandbox: Any, path: str) -> str:
    """``path`` with the trial's cli mocks first (a profile's own PATH included)."""
    access = getattr(sandbox, "mocks", None)
    if access is None:
        return path
    return ":".join([access.bin_dir, *[p for p in path.split(":") if p and p != access.bin_dir]])


def claude_mcp_args(sandbox: Any) -> list[str]:
    """``--mcp-config JSON`` for Claude Code, or nothing without MCP mocks."""
    servers = {e.name: {"type": "http", "url": e.url} for e in endpoints(sandbox)}
    return ["--mcp-config", json.dumps({"mcpServers": servers})] if servers else []


def codex_mcp_servers(sandbox: Any) -> dict[str, dict[str, Any]]:
    """``[mcp_servers.<name>]`` tables for Codex's config (passed as ``-c`` overrides).

    ``required``: Codex gives an optional server about a second to start, then runs the turn
    without its tools and says nothing (a busy machine is enough: the bridge is a Python
    process that must start and post ``initialize``). The case's mocks are part of its
    definition, so the turn waits for them, and a mock that cannot start fails the run loudly."""
    return {
        e.name: {"command": "python3", "args": list(e.stdio), "required": True}
        for e in endpoints(sandbox)
    }


def gemini_mcp_servers(sandbox: Any) -> dict[str, dict[str, Any]]:
    """``mcpServers`` entries for Gemini's settings.json; trusted, so a headless run never
    stops to ask before a tool call."""
    return {
        e.name: {"command": "python3", "args": list(e.stdio), "trust": True}
        for e in endpoints(sandbox)
    }


def write_opencode_mcp(sandbox: Any, config_file: Path) -> None:
    """Add the MCP mocks to OpenCode's global config (``mcp``), keeping what the profile put
    there; OpenCode merges it with ``OPENCODE_CONFIG_CONTENT``."""
    found = endpoints(sandbox)
    if not found:
        return
    try:
        config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.exists() else {}
    except ValueError:
        config = {}
    if not isinstance(config, dict):
        config = {}
    servers = config.setdefault("mcp", {})
    for e in found:
        servers[e.name] = {"type": "remote", "url": e.url, "enabled": True}
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text(json.dumps(config, indent=2), encoding="utf-8")
