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

Isolation: the trial's own ``~/.gemini`` (filled from the profile's ``dir``); the worker's
``/etc/gemini-cli`` settings are not read. The CLI has no switch to skip a trusted workspace's
``.gemini/settings.json``; the hooks it declares are disabled by name in the trial's settings
unless the variant sets ``project_settings=True``. The suite's system prompt is added to the
trial's ``~/.gemini/GEMINI.md`` (the CLI's global memory, part of its system instruction).
Other variant options: ``args`` (more CLI flags).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from proctor.definitions import Variant
from proctor.protocol import AgentEvent
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
from runner.harnesses.jsonl import as_json_text, json_object, whole_number
from runner.sandboxes import Sandbox

# The stream's event types (``packages/core/src/output/types.ts``); others are skipped.
STREAM_EVENTS = {"init", "message", "tool_use", "tool_result", "error", "result"}
SHELL_TOOL = "run_shell_command"
FILE_TOOLS = {"write_file": "file_path", "replace": "file_path"}
# Tool errors that mean the CLI refused the call rather than the call failing.
REFUSAL_ERRORS = {
    "policy_violation",
    "permission_denied",
    "path_not_in_workspace",
    "sandbox_expansion_required",
}
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
PLAN_MIRROR = ".proctor/gemini-plans"
POLICY_FILE = ".proctor/gemini-plan-policy.toml"

_EXIT_CODE = re.compile(r"^Exit Code: (-?\d+)\s*$", re.MULTILINE)
_SIGNAL = re.compile(r"^Signal: ", re.MULTILINE)
_API_ERROR = re.compile(r"^\[API Error: (\{.*\})\]$", re.DOTALL)


def _object(value: Any) -> dict[str, Any]:
    """``value`` when the CLI gave an object there, else an empty one."""
    return value if isinstance(value, dict) else {}


def shell_exit_code(model_text: str) -> int | None:
    """The exit code in the text Gemini CLI sent the model for a shell command.

    The CLI writes ``Exit Code: N`` only when N is not 0, ``Signal: ...`` for a killed command,
    and ``Output: ...`` with a process group for every command that ran to its end."""
    match = _EXIT_CODE.search(model_text)
    if match:
        return int(match.group(1))
    if _SIGNAL.search(model_text) or "Output: " not in model_text:
        return None  # killed, cancelled or moved to the background: no exit code
    return 0


def session_tool_outputs(logs: list[Path], call_ids: set[str] | None = None) -> dict[str, str]:
    """What tool calls of a session returned to the model, by tool call id, from its logs (only
    ``call_ids`` when given: a long session's log is read without decoding every line).

    The text is found wherever the log keeps a ``functionResponse`` (a tool call's result, the
    history replayed on resume), so a change of the log's layout does not lose it."""
    outputs: dict[str, str] = {}

    def visit(value: Any) -> None:
        if isinstance(value, dict):
            response = value.get("functionResponse")
            if isinstance(response, dict) and isinstance(response.get("id"), str):
                body = response.get("response")
                output = body.get("output") if isinstance(body, dict) else None
                if isinstance(output, str):
                    outputs[response["id"]] = output
            for item in value.values():
                visit(item)
        elif isinstance(value, list):
            for item in value:
                visit(item)

    for log in logs:
        try:
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            if "functionResponse" in line and (
                call_ids is None or any(i in line for i in call_ids)
            ):
                visit(json_object(line))
    return (
        outputs if call_ids is None else {i: text for i, text in outputs.items() if i in call_ids}
    )


def find_session_logs(gemini_dir: Path, session_id: str) -> list[Path]:
    """The session logs the CLI keeps under ``tmp/<project>/chats/``, named by the id's start."""
    return sorted(gemini_dir.glob(f"tmp/*/chats/session-*-{session_id[:8]}.jsonl"))


def api_error_message(text: str) -> str:
    """The API's own message inside the CLI's ``[API Error: {json}]`` wrapper, else ``text``."""
    match = _API_ERROR.match(text.strip())
    if match:
        body = json_object(match.group(1))
        error = body.get("error") if body else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
    return text


def _stamp(value: Any) -> int | None:
    """Epoch milliseconds of an ISO timestamp from the stream, or None."""
    if not isinstance(value, str):
        return None
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


@dataclass
class _WaitingCommand:
    """A shell command that ran, waiting for the session log to tell its exit code."""

    call_id: str
    command: str
    output: str
    at_ms: int

    def event(self, exit_code: int | None) -> AgentEvent:
        data = {
            "command": self.command,
            "exit_code": exit_code,
            "output": self.output,
            "origin": "agent",
        }
        return AgentEvent("Command", data, self.at_ms)


class GeminiStreamParser:
    """One invocation's ``stream-json`` lines in, events out.

    ``tool_outputs(session_id, call_ids)`` returns what those tool calls sent the model (from
    the session log; None when there is no log). A shell command's exit code is only there, and the log may lag the stream, so
    events are held back from a shell command on until the log has its exit code (at the end,
    whatever it lacks is None): the events keep the order they happened in."""

    def __init__(
        self,
        *,
        cwd: str | None = None,
        tool_outputs: Callable[[str, set[str]], dict[str, str] | None] | None = None,
    ) -> None:
        self.cwd = cwd
        self.tool_outputs = tool_outputs or (lambda _session_id, _call_ids: {})
        self.session_id: str | None = None
        self.answer = ""
        self.usage: dict[str, int] = {}
        self.finish_reason: str | None = None
        self.permission_denials: list[dict[str, Any]] = []
        self._text: list[str] = []
        self._calls: dict[str, tuple[str, Any]] = {}
        # Events not emitted yet: everything after a shell command waits for its exit code.
        self._queue: list[AgentEvent | _WaitingCommand] = []

    def feed(self, line: str) -> list[AgentEvent]:
        obj = json_object(line)
        if obj is None:
            return []
        kind = obj.get("type")
        if kind == "message" and obj.get("role") == "assistant":
            if isinstance(obj.get("content"), str):
                if not obj.get("delta"):
                    self._flush_text()
                self._text.append(obj["content"])
            return self._drain(final=False)
        if kind not in STREAM_EVENTS:
            return []  # a newer CLI's event: skipped, without ending the text around it
        self._flush_text()
        if kind == "init" and isinstance(obj.get("session_id"), str):
            self.session_id = obj["session_id"]
            model = obj.get("model") if isinstance(obj.get("model"), str) else None
            self._queue.append(
                AgentEvent("Started", {"session_id": self.session_id, "model": model})
            )
        elif kind == "tool_use" and isinstance(obj.get("tool_id"), str):
            self._calls[obj["tool_id"]] = (str(obj.get("tool_name") or "?"), obj.get("parameters"))
        elif kind == "tool_result":
            self._tool_result(obj)
        elif kind == "error":
            severity = obj.get("severity") or "error"
            self._queue.append(
                AgentEvent(
                    "Log", {"stream": "gemini", "text": f"{severity}: {obj.get('message') or ''}"}
                )
            )
        elif kind == "result":
            self._result(obj)
        return self._drain(final=False)

    def finish(self) -> list[AgentEvent]:
        self._flush_text()
        for call_id, (name, params) in self._calls.items():
            self._queue.append(
                AgentEvent(
                    "ToolCall",
                    {
                        "call_id": call_id,
                        "name": name,
                        "input": as_json_text(params),
                        "output": None,
                        "error": None,
                        "status": "incomplete",
                    },
                )
            )
        self._calls.clear()
        return self._drain(final=True)

    def _drain(self, *, final: bool) -> list[AgentEvent]:
        """The queued events, in order, up to the first shell command whose exit code the
        session log does not hold yet (all of them at the end, unknown codes as None)."""
        waiting = {item.call_id for item in self._queue if isinstance(item, _WaitingCommand)}
        known = self.tool_outputs(self.session_id, waiting) if waiting and self.session_id else {}
        if known is None:
            known, final = {}, True  # the session keeps no log: nothing to wait for
        events: list[AgentEvent] = []
        while self._queue:
            item = self._queue[0]
            if isinstance(item, _WaitingCommand):
                if item.call_id not in known and not final:
                    break
                item = item.event(
                    shell_exit_code(known[item.call_id]) if item.call_id in known else None
                )
            self._queue.pop(0)
            events.append(item)
        return events

    # --- line kinds ------------------------------------------------------------------------------

    def _flush_text(self) -> None:
        text = "".join(self._text)
        self._text = []
        if text.strip():
            self.answer = text
            self._queue.append(
                AgentEvent("Message", {"role": "assistant", "text": text, "usage": None})
            )

    def _tool_result(self, obj: dict[str, Any]) -> None:
        call_id = obj.get("tool_id")
        name, params = (
            self._calls.pop(call_id, ("?", None)) if isinstance(call_id, str) else ("?", None)
        )
        error = obj.get("error") if isinstance(obj.get("error"), dict) else None
        failed = obj.get("status") != "success"
        output = obj["output"] if isinstance(obj.get("output"), str) else ""
        message = str((error or {}).get("message") or output) if failed else None
        self._queue.append(
            AgentEvent(
                "ToolCall",
                {
                    "call_id": call_id if isinstance(call_id, str) else None,
                    "name": name,
                    "input": as_json_text(params),
                    "output": None if failed else output,
                    "error": message,
                    "status": "error" if failed else "completed",
                },
            )
        )
        params = _object(params)
        error_type = str((error or {}).get("type") or "")
        if failed and (error_type in REFUSAL_ERRORS or (message or "").startswith("Access denied")):
            self.permission_denials.append(
                {
                    "tool": name,
                    "input": as_json_text(params),
                    "call_id": call_id,
                    "reason": message,
                }
            )
        if name == SHELL_TOOL and not failed and isinstance(params.get("command"), str):
            # The exit code is only in the session log, which may lag the stream: it waits.
            at = _stamp(obj.get("timestamp")) or int(time.time() * 1000)
            self._queue.append(_WaitingCommand(str(call_id), params["command"], output, at))
        elif name in FILE_TOOLS and not failed:
            path = params.get(FILE_TOOLS[name])
            if isinstance(path, str) and path:
                self._queue.append(AgentEvent("FileChange", {"paths": [self._absolute(path)]}))

    def _result(self, obj: dict[str, Any]) -> None:
        if obj.get("status") == "success":
            self.finish_reason = "completed"
        else:
            error = _object(obj.get("error"))
            detail = api_error_message(str(error.get("message") or "")).strip().splitlines()
            status = str(obj.get("status") or "error")
            self.finish_reason = f"{status}: {detail[0][:300]}" if detail else status
        stats = obj.get("stats")
        if not isinstance(stats, dict):
            return
        # Gemini counts cached tokens inside input_tokens, as Proctor does.
        input_tokens = whole_number(stats.get("input_tokens"))
        output_tokens = whole_number(stats.get("output_tokens"))
        self.usage = {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_read_tokens": whole_number(stats.get("cached")),
            "cache_write_tokens": 0,
            "total_tokens": whole_number(stats.get("total_tokens")) or input_tokens + output_tokens,
        }
        self._queue.append(AgentEvent("Usage", dict(self.usage)))

    def _absolute(self, path: str) -> str:
        if os.path.isabs(path) or not self.cwd:
            return path
        return os.path.normpath(os.path.join(self.cwd, path))


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


class GeminiHarness(AgentCliHarness):
    name = "gemini"
    capabilities = frozenset({CONVERSATION_RESUME, PLAN_MODE})
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
        return {
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            # Nothing of the worker's own installation settings: these files do not exist.
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH": f"{sandbox.home}/.proctor/gemini-system-settings.json",
            "GEMINI_CLI_SYSTEM_DEFAULTS_PATH": f"{sandbox.home}/.proctor/gemini-system-defaults.json",
        }

    def setup(self, sandbox: Sandbox, log: RawSink) -> None:
        super().setup(sandbox, log)
        proctor_dir = sandbox.host_home / ".proctor"
        proctor_dir.mkdir(parents=True, exist_ok=True)
        (sandbox.host_home / POLICY_FILE).write_text(PLAN_POLICY, encoding="utf-8")
        self._write_settings(sandbox, log)

    def _write_settings(self, sandbox: Sandbox, log: RawSink) -> None:
        """The trial's user settings: the profile's, plus what headless runs need."""
        path = sandbox.host_home / self.config_dir / "settings.json"
        try:
            settings = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        except ValueError:
            settings = None
        if not isinstance(settings, dict):
            raise HarnessError(
                f"profile {self.profile.name}: settings.json in its dir must be a plain JSON object "
                "(no comments): the harness adds its own settings to it"
            )
        if "GEMINI_API_KEY" in self.profile.env:
            auth = settings.setdefault("security", {}).setdefault("auth", {})
            auth.setdefault("selectedType", "gemini-api-key")
        settings.setdefault("privacy", {})["usageStatisticsEnabled"] = False
        general = settings.setdefault("general", {})
        general["enableAutoUpdate"] = False
        general["enableAutoUpdateNotification"] = False
        if not self.options.get("project_settings"):
            hooks = workspace_hook_names(sandbox.host_workspace / ".gemini" / "settings.json")
            if hooks:
                disabled = settings.setdefault("hooksConfig", {}).setdefault("disabled", [])
                disabled.extend(name for name in hooks if name not in disabled)
                log(
                    "stdout",
                    f"gemini: workspace hooks disabled (not under test): {', '.join(hooks)}",
                )
        path.write_text(json.dumps(settings, indent=2), encoding="utf-8")

    def _write_memory(self, sandbox: Sandbox, system_prompt: str) -> None:
        """Add the system prompt to the global GEMINI.md, after the profile's own, once."""
        memory = sandbox.host_home / self.config_dir / "GEMINI.md"
        existing = memory.read_text(encoding="utf-8") if memory.exists() else ""
        memory.write_text(
            (existing.rstrip("\n") + "\n\n" if existing.strip() else "") + system_prompt + "\n",
            encoding="utf-8",
        )
        self._memory_written = True

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
            self._write_memory(sandbox, system_prompt)
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
