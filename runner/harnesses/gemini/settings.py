"""The files the gemini harness writes into a trial's home before the CLI runs: the user
settings (``~/.gemini/settings.json``, the profile's plus what headless runs need), the policy
that keeps a planning turn from implementing its plan, and the system prompt in the CLI's
global memory (``~/.gemini/GEMINI.md``)."""

from __future__ import annotations

import json
from pathlib import Path

from runner.harnesses.base import HarnessError, RawSink

PLAN_POLICY = """\
# Proctor: stop after planning. Headless, Gemini CLI approves exit_plan_mode by itself and
# implements the plan in the same run; the approval comes as the next turn instead.
[[rule]]
toolName = "exit_plan_mode"
decision = "deny"
priority = 900
modes = ["plan"]
denyMessage = "Present the plan and stop; the user approves it in the next message."
"""
POLICY_FILE = ".proctor/gemini-plan-policy.toml"


def write_plan_policy(home: Path) -> None:
    """The plan-mode policy, at ``POLICY_FILE`` under the trial's ``home`` (host path)."""
    path = home / POLICY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PLAN_POLICY, encoding="utf-8")


def write_user_settings(
    path: Path,
    *,
    profile: str,
    api_key_login: bool,
    workspace_settings: Path | None,
    log: RawSink,
    mcp_servers: dict | None = None,
) -> None:
    """Add what headless runs need to the user settings at ``path`` (the profile's, if any):
    the API-key login when ``api_key_login``, no telemetry, no auto-update, and the hooks that
    ``workspace_settings`` declares disabled by name (None leaves them on)."""
    try:
        settings = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except ValueError:
        settings = None
    if not isinstance(settings, dict):
        raise HarnessError(
            f"profile {profile}: settings.json in its dir must be a plain JSON object "
            "(no comments): the harness adds its own settings to it"
        )
    if api_key_login:
        auth = settings.setdefault("security", {}).setdefault("auth", {})
        auth.setdefault("selectedType", "gemini-api-key")
    settings.setdefault("privacy", {})["usageStatisticsEnabled"] = False
    general = settings.setdefault("general", {})
    general["enableAutoUpdate"] = False
    general["enableAutoUpdateNotification"] = False
    if workspace_settings is not None:
        hooks = workspace_hook_names(workspace_settings)
        if hooks:
            disabled = settings.setdefault("hooksConfig", {}).setdefault("disabled", [])
            disabled.extend(name for name in hooks if name not in disabled)
            log("stdout", f"gemini: workspace hooks disabled (not under test): {', '.join(hooks)}")
    if mcp_servers:  # the case's MCP mocks (runner.mocks.agent_config)
        settings.setdefault("mcpServers", {}).update(mcp_servers)
    path.write_text(json.dumps(settings, indent=2), encoding="utf-8")


def append_memory(memory: Path, system_prompt: str) -> None:
    """Add ``system_prompt`` to the global GEMINI.md at ``memory``, after the profile's own."""
    existing = memory.read_text(encoding="utf-8") if memory.exists() else ""
    memory.write_text(
        (existing.rstrip("\n") + "\n\n" if existing.strip() else "") + system_prompt + "\n",
        encoding="utf-8",
    )


def workspace_hook_names(settings_file: Path) -> list[str]:
    """The names Gemini CLI gives the hooks a workspace's settings declare (a hook's ``name``,
    else its ``command``), to disable them by name."""
    try:
        settings = json.loads(settings_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    names: list[str] = []
    for definitions in (hooks or {}).values() if isinstance(hooks, dict) else []:
        for definition in definitions if isinstance(definitions, list) else []:
            for hook in (definition.get("hooks") or []) if isinstance(definition, dict) else []:
                name = hook.get("name") or hook.get("command") if isinstance(hook, dict) else None
                if isinstance(name, str) and name not in names:
                    names.append(name)
    return names
