"""The ``claude-code`` harness: Anthropic's Claude Code CLI, headless.

    variant(harness="claude-code", model="claude-sonnet-4-5", profile=profile("claude", env={
        "ANTHROPIC_API_KEY": "$ANTHROPIC_API_KEY",          # from the worker's environment
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:8080",      # optional: a gateway (no /v1)
    }))

Needs the ``claude`` command in the sandbox: ``npm install -g --prefix ~/.local @anthropic-ai/claude-code``
as the profile's ``install`` (``~/.local/bin`` is on PATH), or a ``PATH`` in the profile's env
that holds it.

Each turn is ``claude -p PROMPT --output-format stream-json --verbose`` from the workspace, stdin
closed. The first turn fixes the session id (``--session-id``), so it is known even if the CLI
dies early; later turns resume it (``--resume``, which keeps the id). Permissions are bypassed
(the sandbox is the boundary; ``IS_SANDBOX=1`` lets that run as root) unless the variant's
``permission_mode`` option names another mode, whose refusals become permission denials.

Plan mode: the planning turn runs with ``--permission-mode plan``; in print mode the CLI offers
no ExitPlanMode tool, the model writes its plan to ``~/.claude/plans/<name>.md`` with Write, and
that folder is the plan file the runner watches. The approval turn resumes the session in act
mode, and the CLI itself tells the model where its plan is.

Only user settings (the trial's own ``~/.claude``, filled from the profile's ``dir``) are
loaded: settings and hooks committed in the workspace's ``.claude/`` are not under test and are
skipped unless the variant sets ``project_settings=True``. Other variant options: ``args``
(more CLI flags).
"""

from __future__ import annotations

import uuid
from pathlib import Path

from proctor.definitions import Variant
from runner.harnesses.agent_cli import AgentCliHarness
from runner.harnesses.base import (
    CONVERSATION_RESUME,
    PLAN_MODE,
    EventSink,
    HarnessError,
    RawSink,
    TurnRequest,
    TurnResult,
)
from runner.harnesses.claude_code.stream import ClaudeStreamParser
from runner.mocks.agent_config import claude_mcp_args, otlp_url
from runner.sandboxes import Sandbox

ACT_PERMISSION_MODE = "bypassPermissions"
# Claude Code's own OpenTelemetry, sent to the trial's receiver: metrics, events (logs) and
# the beta traces, over OTLP/HTTP with protobuf. The intervals are short so a turn cut off by
# its time limit has still sent most of what it did; a finished turn flushes as it exits.
TELEMETRY_ENV = {
    "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
    "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": "1",
    "OTEL_METRICS_EXPORTER": "otlp",
    "OTEL_LOGS_EXPORTER": "otlp",
    "OTEL_TRACES_EXPORTER": "otlp",
    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    "OTEL_METRIC_EXPORT_INTERVAL": "1000",
    "OTEL_LOGS_EXPORT_INTERVAL": "500",
    "OTEL_BSP_SCHEDULE_DELAY": "500",
}
PERMISSION_MODES = ("acceptEdits", "auto", "bypassPermissions", "default", "dontAsk")


class ClaudeCodeHarness(AgentCliHarness):
    name = "claude-code"
    capabilities = frozenset({CONVERSATION_RESUME, PLAN_MODE})
    option_names = frozenset({"args", "project_settings", "permission_mode"})
    exports_otlp = True
    executable = "claude"
    config_dir = ".claude"
    install_hint = (
        "install it with the profile's install step (npm install -g --prefix ~/.local @anthropic-ai/claude-code) "
        "or put its folder on PATH in the profile's env"
    )

    def __init__(self, variant: Variant) -> None:
        super().__init__(variant)
        mode = self.options.get("permission_mode", ACT_PERMISSION_MODE)
        if mode not in PERMISSION_MODES:
            raise HarnessError(
                f"variant {variant.name}: option permission_mode must be one of {', '.join(PERMISSION_MODES)}, not {mode!r}"
            )
        self.act_permission_mode: str = mode

    @classmethod
    def declares_plan_file(cls, variant: Variant) -> bool:
        return True

    def plan_file(self, sandbox: Sandbox) -> Path | None:
        """The plans folder: the newest file written there while planning is the plan."""
        return sandbox.host_home / self.config_dir / "plans"

    def agent_env(self, sandbox: Sandbox) -> dict[str, str]:
        env = {
            # Root may bypass permissions only in a declared sandbox.
            "IS_SANDBOX": "1",
            "DISABLE_AUTOUPDATER": "1",
            # Anthropic's own usage reporting; the OpenTelemetry export below is separate.
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        receiver = otlp_url(sandbox)
        if receiver:
            env.update(TELEMETRY_ENV, OTEL_EXPORTER_OTLP_ENDPOINT=receiver)
        return env

    def command_line(self, request: TurnRequest, *, new_session_id: str | None) -> list[str]:
        """The argv of one turn: a new session under ``new_session_id``, or a resumed one."""
        argv = [self.executable, "-p", "--output-format", "stream-json", "--verbose"]
        argv += [
            "--permission-mode",
            "plan" if request.mode == "plan" else self.act_permission_mode,
        ]
        sources = "user,project,local" if self.options.get("project_settings") else "user"
        argv += ["--setting-sources", sources]
        if request.model:
            argv += ["--model", request.model]
        if request.session_id:
            argv += ["--resume", request.session_id]
        elif new_session_id:
            argv += ["--session-id", new_session_id]
        system_prompt = self.system_prompt_for(request)
        if system_prompt:
            argv += ["--append-system-prompt", system_prompt]
        argv += self.extra_args()
        # "--" keeps a prompt that starts with a dash from being read as a flag.
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
        new_session_id = None if request.session_id else str(uuid.uuid4())
        argv = self.command_line(request, new_session_id=new_session_id)
        argv[-2:-2] = claude_mcp_args(sandbox)  # the case's MCP mocks, before "--" PROMPT
        parser = ClaudeStreamParser(cwd=sandbox.workspace)
        return self.run_cli(
            sandbox,
            argv,
            parser,
            emit=emit,
            raw=raw,
            timeout_s=timeout_s,
            session_id=request.session_id or new_session_id,
        )
