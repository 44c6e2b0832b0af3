"""The ``codex`` harness: OpenAI's Codex CLI, headless (``codex exec --json``).

    variant(harness="codex", model="gpt-5-codex", profile=profile("codex", env={
        "OPENAI_API_KEY": "$OPENAI_API_KEY",                # from the worker's environment
        "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1",      # optional: another Responses API
    }))

Needs the ``codex`` command in the sandbox: ``npm install -g --prefix ~/.local @openai/codex``
as the profile's ``install`` (``~/.local/bin`` is on PATH), or a ``PATH`` in the profile's env
that holds it.

Each turn is ``codex exec --json PROMPT`` from the workspace, stdin closed, with Codex's own
sandbox and approvals off (Proctor's sandbox is the boundary). A follow-up turn is
``codex exec resume <thread id> PROMPT``, which keeps the thread id; flags are not inherited on
resume, so every turn passes them all. Codex reports usage cumulative per thread: the harness
remembers each thread's totals and records every turn's own share.

With ``OPENAI_BASE_URL`` in the profile's env, Codex talks to that address through a provider of
its own (overrides of the built-in provider are ignored by Codex) using the Responses API, the
only one it speaks; the key is read from ``OPENAI_API_KEY`` (or ``CODEX_API_KEY``).

``codex exec`` has no plan mode, so this harness does not offer one. State lives in the trial's
own ``CODEX_HOME`` (``~/.codex``, filled from the profile's ``dir``); project hooks in the
workspace stay untrusted and do not run unless the variant sets ``project_settings=True``.
Other variant options: ``config`` (a dict of Codex config overrides, passed as ``-c key=value``)
and ``args`` (more CLI flags).
"""

from __future__ import annotations

import json
from typing import Any

from proctor.definitions import Variant
from runner.harnesses.agent_cli import AgentCliHarness
from runner.harnesses.base import (
    CONVERSATION_RESUME,
    EventSink,
    HarnessError,
    RawSink,
    TurnRequest,
    TurnResult,
)
from runner.harnesses.codex.stream import CodexStreamParser
from runner.harnesses.profile_env import resolve_profile_env
from runner.mocks.agent_config import codex_mcp_servers, otlp_url
from runner.sandboxes import Sandbox

PROVIDER_ID = "proctor"
KEY_VARIABLES = ("OPENAI_API_KEY", "CODEX_API_KEY")


def toml_value(value: Any) -> str:
    """A Python value as TOML for ``-c key=value`` (JSON strings, numbers and booleans are)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{key}={toml_value(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(toml_value(item) for item in value) + "]"
    if value is None:
        raise ValueError("TOML has no null")
    return json.dumps(value)


def telemetry_overrides(receiver: str | None) -> list[str]:
    """``[otel]`` overrides sending Codex's own OpenTelemetry (events as logs, traces and
    metrics) to the trial's receiver, OTLP/HTTP with protobuf; none without a receiver. Codex
    flushes them as it exits."""
    if not receiver:
        return []
    overrides = [f"otel.environment={toml_value('proctor')}"]
    for setting, signal in (
        ("exporter", "logs"),
        ("trace_exporter", "traces"),
        ("metrics_exporter", "metrics"),
    ):
        exporter = {"otlp-http": {"endpoint": f"{receiver}/v1/{signal}", "protocol": "binary"}}
        overrides.append(f"otel.{setting}={toml_value(exporter)}")
    return [word for override in overrides for word in ("-c", override)]


class CodexHarness(AgentCliHarness):
    name = "codex"
    capabilities = frozenset({CONVERSATION_RESUME})
    option_names = frozenset({"args", "project_settings", "config"})
    exports_otlp = True
    executable = "codex"
    config_dir = ".codex"
    install_hint = (
        "install it with the profile's install step (npm install -g --prefix ~/.local @openai/codex) "
        "or put its folder on PATH in the profile's env"
    )

    def __init__(self, variant: Variant) -> None:
        super().__init__(variant)
        config = self.options.get("config") or {}
        if not isinstance(config, dict):
            raise HarnessError(
                f"variant {variant.name}: option config must be a dict of Codex settings"
            )
        try:
            self.config_overrides = [f"{key}={toml_value(value)}" for key, value in config.items()]
        except ValueError:
            raise HarnessError(
                f"variant {variant.name}: option config holds a None, which Codex settings cannot"
            ) from None
        # Each thread's cumulative usage after its last turn.
        self._thread_totals: dict[str, dict[str, int]] = {}

    def agent_env(self, sandbox: Sandbox) -> dict[str, str]:
        return {"CODEX_HOME": f"{sandbox.home}/{self.config_dir}"}

    def _provider_overrides(self) -> list[str]:
        env = resolve_profile_env(self.profile.env, profile=self.profile.name)
        base_url = env.get("OPENAI_BASE_URL")
        if not base_url:
            return []
        key_variable = next((name for name in KEY_VARIABLES if name in env), KEY_VARIABLES[0])
        provider = {
            "name": "Proctor profile",
            "base_url": base_url,
            "env_key": key_variable,
            "wire_api": "responses",
        }
        return [
            f"model_provider={toml_value(PROVIDER_ID)}",
            f"model_providers.{PROVIDER_ID}={toml_value(provider)}",
        ]

    def command_line(self, request: TurnRequest) -> list[str]:
        """The argv of one turn: a new thread, or ``resume`` of the request's session."""
        argv = [self.executable, "exec"]
        if request.session_id:
            argv += ["resume", request.session_id]
        argv += ["--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
        if self.options.get("project_settings"):
            argv += ["--trust", "--dangerously-bypass-hook-trust"]
        if request.model:
            argv += ["--model", request.model]
        overrides = [*self._provider_overrides(), *self.config_overrides]
        system_prompt = self.system_prompt_for(request)
        if system_prompt and not request.session_id:
            # Developer instructions are part of the thread: a resumed turn already has them.
            overrides.append(f"developer_instructions={toml_value(system_prompt)}")
        for override in overrides:
            argv += ["-c", override]
        argv += self.extra_args()
        return [*argv, "--", request.prompt]

    def run_turn(
        self,
        sandbox: Sandbox,
        request: TurnRequest,
        *,
        emit: EventSink,
        raw: RawSink,
        timeout_s: float,
    ) -> TurnResult:
        previous = self._thread_totals.get(request.session_id) if request.session_id else None
        parser = CodexStreamParser(
            cwd=sandbox.workspace, model=request.model, previous_totals=previous
        )
        argv = self.command_line(request)
        # The case's MCP mocks as [mcp_servers.<name>] overrides, before "--" PROMPT.
        for name, server in codex_mcp_servers(sandbox).items():
            argv[-2:-2] = ["-c", f"mcp_servers.{name}={toml_value(server)}"]
        argv[-2:-2] = telemetry_overrides(otlp_url(sandbox))
        result = self.run_cli(
            sandbox,
            argv,
            parser,
            emit=emit,
            raw=raw,
            timeout_s=timeout_s,
            session_id=request.session_id,
        )
        if parser.session_id and parser.totals is not None:
            self._thread_totals[parser.session_id] = parser.totals
        return result
