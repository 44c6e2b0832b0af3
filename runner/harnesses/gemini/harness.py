"""The ``gemini`` harness: Google's Gemini CLI, headless (``gemini -p ... -o stream-json``).

    variant(harness="gemini", model="gemini-2.5-pro", profile=profile("gemini", env={
        "GEMINI_API_KEY": "$GEMINI_API_KEY",                # from the worker's environment
        "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:8080",  # optional: another Gemini API (no /v1beta)
    }))

Needs the ``gemini`` command in the sandbox: ``npm install -g --prefix ~/.local @google/gemini-cli``
as the profile's ``install`` (``~/.local/bin`` is on PATH), or a ``PATH`` in the profile's env
that holds it. The CLI speaks only the Gemini API (``streamGenerateContent``).

Each turn runs from the workspace with stdin closed, the workspace trusted
(``GEMINI_CLI_TRUST_WORKSPACE``: an untrusted folder silently drops the approval mode back to
asking, and asking is refused headless) and every tool approved (``--approval-mode yolo``). The
first turn fixes the session id (``--session-id``); later turns ``--resume`` it, which keeps it.
With ``GEMINI_API_KEY`` in the profile's env the trial's settings pin the API-key login, without
which a custom base URL makes the CLI pick a gateway login and fail.

Plan mode: the planning turn runs with ``--approval-mode plan`` (read-only tools, the plan goes
to ``~/.gemini/tmp/<project>/<session>/plans/*.md``) plus a policy that denies
``exit_plan_mode``: headless, the CLI would otherwise approve its own plan and implement it in
the same run. The approval turn resumes the session in yolo mode. The harness copies the plans
of its session into ``~/.proctor/gemini-plans/``, the plan folder the runner watches.

What the CLI hides: shell exit codes are not in its stream (a failing command is still a
``success``); the harness reads them from the session log the CLI keeps under
``~/.gemini/tmp/<project>/chats/``, where the text sent to the model carries ``Exit Code: N``.
The stream is read in ``stream.py``, the log in ``session_log.py``, and the files written
into the trial's home before the CLI runs come from ``settings.py``.

Isolation: the trial's own ``~/.gemini`` (filled from the profile's ``dir``); the worker's
``/etc/gemini-cli`` settings are not read. The CLI has no switch to skip a trusted workspace's
``.gemini/settings.json``; the hooks it declares are disabled by name in the trial's settings
unless the variant sets ``project_settings=True``. The suite's system prompt is added to the
trial's ``~/.gemini/GEMINI.md`` (the CLI's global memory, part of its system instruction).
Other variant options: ``args`` (more CLI flags).
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from proctor.definitions import Variant
from runner.harnesses.agent_cli import AgentCliHarness
from runner.harnesses.base import (
    CONVERSATION_RESUME,
    PLAN_MODE,
    EventSink,
    RawSink,
    TurnRequest,
    TurnResult,
)
from runner.harnesses.gemini.session_log import find_session_logs, session_tool_outputs
from runner.harnesses.gemini.settings import (
    POLICY_FILE,
    append_memory,
    write_plan_policy,
    write_user_settings,
)
from runner.harnesses.gemini.stream import GeminiStreamParser
from runner.mocks.agent_config import gemini_mcp_servers, otlp_url
from runner.sandboxes import Sandbox

PLAN_MIRROR = ".proctor/gemini-plans"


# Gemini CLI's own OpenTelemetry, sent to the trial's receiver over OTLP/HTTP (which it sends
# as JSON), prompts left out; it flushes as it exits.
TELEMETRY_ENV = {
    "GEMINI_TELEMETRY_ENABLED": "true",
    "GEMINI_TELEMETRY_TARGET": "local",
    "GEMINI_TELEMETRY_OTLP_PROTOCOL": "http",
    "GEMINI_TELEMETRY_LOG_PROMPTS": "false",
}


class GeminiHarness(AgentCliHarness):
    name = "gemini"
    capabilities = frozenset({CONVERSATION_RESUME, PLAN_MODE})
    exports_otlp = True
    executable = "gemini"
    config_dir = ".gemini"
    install_hint = (
        "install it with the profile's install step (npm install -g --prefix ~/.local @google/gemini-cli) "
        "or put its folder on PATH in the profile's env"
    )

    def __init__(self, variant: Variant) -> None:
        super().__init__(variant)
        self._memory_written = False

    @classmethod
    def declares_plan_file(cls, variant: Variant) -> bool:
        return True

    def plan_file(self, sandbox: Sandbox) -> Path | None:
        """The folder the session's plans are copied to after each turn."""
        return sandbox.host_home / PLAN_MIRROR

    def agent_env(self, sandbox: Sandbox) -> dict[str, str]:
        env = {
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            # Nothing of the worker's own installation settings: these files do not exist.
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH": f"{sandbox.home}/.proctor/gemini-system-settings.json",
            "GEMINI_CLI_SYSTEM_DEFAULTS_PATH": f"{sandbox.home}/.proctor/gemini-system-defaults.json",
        }
        receiver = otlp_url(sandbox)
        if receiver:
            env.update(TELEMETRY_ENV, GEMINI_TELEMETRY_OTLP_ENDPOINT=receiver)
        return env

    def setup(self, sandbox: Sandbox, log: RawSink) -> None:
        super().setup(sandbox, log)
        write_plan_policy(sandbox.host_home)
        self._write_settings(sandbox, log)

    def _write_settings(self, sandbox: Sandbox, log: RawSink) -> None:
        """The trial's user settings: the profile's, plus what headless runs need."""
        # The workspace's hooks are not under test, unless the variant says they are.
        workspace = sandbox.host_workspace / ".gemini" / "settings.json"
        write_user_settings(
            sandbox.host_home / self.config_dir / "settings.json",
            profile=self.profile.name,
            api_key_login="GEMINI_API_KEY" in self.profile.env,
            workspace_settings=None if self.options.get("project_settings") else workspace,
            log=log,
            mcp_servers=gemini_mcp_servers(sandbox),
        )

    def command_line(
        self, sandbox: Sandbox, request: TurnRequest, *, new_session_id: str | None
    ) -> list[str]:
        argv = [self.executable, "--output-format", "stream-json"]
        if request.mode == "plan":
            argv += ["--approval-mode", "plan", "--policy", f"{sandbox.home}/{POLICY_FILE}"]
        else:
            argv += ["--approval-mode", "yolo"]
        if request.model:
            argv += ["--model", request.model]
        if request.session_id:
            argv += ["--resume", request.session_id]
        elif new_session_id:
            argv += ["--session-id", new_session_id]
        argv += self.extra_args()
        # One argument, so a prompt that starts with a dash is not read as a flag.
        return [*argv, f"--prompt={request.prompt}"]

    def run_turn(
        self,
        sandbox: Sandbox,
        request: TurnRequest,
        *,
        emit: EventSink,
        raw: RawSink,
        timeout_s: float,
    ) -> TurnResult:
        system_prompt = self.system_prompt_for(request)
        if system_prompt and not self._memory_written:
            # Once per trial: every turn has the prompt again, appending it twice would repeat it.
            append_memory(sandbox.host_home / self.config_dir / "GEMINI.md", system_prompt)
            self._memory_written = True
        new_session_id = None if request.session_id else str(uuid.uuid4())
        gemini_dir = sandbox.host_home / self.config_dir

        def tool_outputs(session_id: str, call_ids: set[str]) -> dict[str, str] | None:
            logs = find_session_logs(gemini_dir, session_id)
            return session_tool_outputs(logs, call_ids) if logs else None

        parser = GeminiStreamParser(cwd=sandbox.workspace, tool_outputs=tool_outputs)
        argv = self.command_line(sandbox, request, new_session_id=new_session_id)
        result = self.run_cli(
            sandbox,
            argv,
            parser,
            emit=emit,
            raw=raw,
            timeout_s=timeout_s,
            session_id=request.session_id or new_session_id,
        )
        if result.session_id:
            self._mirror_plans(sandbox, result.session_id)
        return result

    def _mirror_plans(self, sandbox: Sandbox, session_id: str) -> None:
        """Copy the session's plans where the runner watches, keeping their times, so a plan
        written or rewritten in this turn shows as new there."""
        mirror = sandbox.host_home / PLAN_MIRROR
        for plan in sorted(
            (sandbox.host_home / self.config_dir).glob(f"tmp/*/{session_id}/plans/*.md")
        ):
            target = mirror / plan.name
            source_stat = plan.stat()
            if target.exists():
                target_stat = target.stat()
                if (target_stat.st_mtime_ns, target_stat.st_size) == (
                    source_stat.st_mtime_ns,
                    source_stat.st_size,
                ):
                    continue
            mirror.mkdir(parents=True, exist_ok=True)
            shutil.copy2(plan, target)
