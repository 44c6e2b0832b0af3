"""The ``opencode`` harness: OpenCode, headless (``opencode run --format json``).

    variant(harness="opencode", model="local/qwen3-coder", profile=profile("opencode", env={
        "OPENCODE_CONFIG_CONTENT": json.dumps({"provider": {"local": {
            "npm": "@ai-sdk/openai-compatible",
            "options": {"baseURL": "http://127.0.0.1:8080/v1", "apiKey": "{env:LOCAL_KEY}"},
            "models": {"qwen3-coder": {}}}}}),
        "LOCAL_KEY": "$LOCAL_KEY",                          # from the worker's environment
    }))

The model is ``provider/model``. Providers, base URLs (``baseURL`` includes ``/v1``) and keys
are OpenCode's own configuration: inline in the profile's env (``OPENCODE_CONFIG_CONTENT``,
where OpenCode fills ``{env:NAME}`` itself; write ``$$schema`` for a ``$schema`` key, as ``$``
names a worker variable there) or an ``opencode.json`` in the profile's ``dir``, which lands in
the trial's ``~/.config/opencode``. Built-in providers read their usual keys
(``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``) from the env.

Needs the ``opencode`` command in the sandbox: ``npm install -g --prefix ~/.local opencode-ai``
as the profile's ``install`` (``~/.local/bin`` is on PATH), or a ``PATH`` in the profile's env
that holds it.

Each turn runs from the workspace with stdin closed (OpenCode appends piped stdin to the
message) and ``--auto``, without which ``run`` rejects every permission it would ask for. A
follow-up turn continues the session with ``--session``, which keeps its id.

Plan mode: the planning turn runs the built-in ``plan`` agent, the approval turn the ``build``
agent, under OpenCode's newer plan flow (``OPENCODE_EXPERIMENTAL_PLAN_MODE``), which tells the
model the file to write its plan to: ``.opencode/plans/<time>-<slug>.md`` in a git workspace,
else ``~/.local/share/opencode/plans/``. That folder is the plan file the runner watches. The
plan agent may edit only its plan, but its shell is not blocked: a command that changes files
while planning runs, shows in the planning turn and in the workspace diff.

What the CLI hides: nothing the transcript needs. Exit codes are in each ``bash`` tool part
(``state.metadata.exit``); tokens come per step and add up to the turn's.

Isolation: the trial's own ``~/.config/opencode`` and ``~/.local/share/opencode`` (sessions).
The workspace's ``opencode.json``, ``.opencode/`` (agents, commands, plugins) and, with them,
its instruction files (``AGENTS.md``) are not loaded unless the variant sets
``project_settings=True``: OpenCode switches them off together. The suite's system prompt is
added to the trial's global ``~/.config/opencode/AGENTS.md``. Other variant options: ``args``
(more CLI flags).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from proctor.agent_events import AgentEvent
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
from runner.harnesses.jsonl import as_json_text, json_object, whole_number
from runner.mocks.agent_config import write_opencode_mcp
from runner.sandboxes import Sandbox

SHELL_TOOL = "bash"
# What OpenCode shows for a command that printed nothing.
NO_OUTPUT = "(no output)"
FILE_TOOLS = {"write", "edit", "multiedit", "patch", "apply_patch"}
# OpenCode's words when a permission rule or an unanswered ask stopped a tool call.
REFUSALS = ("The user has specified a rule which prevents", "The user rejected permission")


def _object(value: Any) -> dict[str, Any]:
    """``value`` when the CLI gave an object there, else an empty one."""
    return value if isinstance(value, dict) else {}


def changed_paths(part_state: dict[str, Any]) -> list[str]:
    """The files an edit-type tool part names: ``filePath`` in its input, ``filepath`` or
    ``files`` in its metadata (patch tools)."""
    tool_input = _object(part_state.get("input"))
    metadata = _object(part_state.get("metadata"))
    paths: list[str] = []
    for candidate in (tool_input.get("filePath"), metadata.get("filepath")):
        if isinstance(candidate, str) and candidate and candidate not in paths:
            paths.append(candidate)
    files = metadata.get("files")
    for entry in files if isinstance(files, list) else []:
        path = entry.get("filePath") or entry.get("path") if isinstance(entry, dict) else entry
        if isinstance(path, str) and path and path not in paths:
            paths.append(path)
    return paths


class OpenCodeStreamParser:
    """One invocation's ``--format json`` lines in, events out."""

    def __init__(self, *, cwd: str | None = None, model: str | None = None) -> None:
        self.cwd = cwd
        self.model = model
        self.session_id: str | None = None
        self.answer = ""
        self.usage: dict[str, int] = {}
        self.finish_reason: str | None = None
        self.permission_denials: list[dict[str, Any]] = []
        self._error: str | None = None
        self._last_step: str | None = None

    def feed(self, line: str) -> list[AgentEvent]:
        obj = json_object(line)
        if obj is None:
            return []
        events: list[AgentEvent] = []
        if isinstance(obj.get("sessionID"), str) and self.session_id is None:
            self.session_id = obj["sessionID"]
            events.append(
                AgentEvent("Started", {"session_id": self.session_id, "model": self.model})
            )
        kind = obj.get("type")
        part = _object(obj.get("part"))
        if kind == "text" and isinstance(part.get("text"), str) and part["text"].strip():
            self.answer = part["text"]
            events.append(
                AgentEvent("Message", {"role": "assistant", "text": part["text"], "usage": None})
            )
        elif kind == "tool_use":
            events += self._tool(part)
        elif kind == "step_finish":
            self._last_step = str(part.get("reason") or "")
            events += self._usage(part.get("tokens"), part.get("cost"))
        elif kind == "error":
            self._error = _error_text(obj.get("error"))
            events.append(
                AgentEvent("Log", {"stream": "opencode", "text": f"error: {self._error}"})
            )
        return events

    def finish(self) -> list[AgentEvent]:
        if self._error is not None:
            self.finish_reason = (
                f"error: {self._error.strip().splitlines()[0][:300]}"
                if self._error.strip()
                else "error"
            )
        elif self._last_step == "stop":
            self.finish_reason = "completed"
        elif self._last_step and self._last_step != "tool-calls":
            self.finish_reason = (
                self._last_step
            )  # "length", "content-filter": why the model stopped
        return []

    def _tool(self, part: dict[str, Any]) -> list[AgentEvent]:
        state = _object(part.get("state"))
        name = str(part.get("tool") or "?")
        call_id = part.get("callID") if isinstance(part.get("callID"), str) else None
        status = state.get("status")
        failed = status != "completed"
        output = state.get("output") if isinstance(state.get("output"), str) else None
        error = (
            _error_text(state.get("error")) if failed and state.get("error") is not None else None
        )
        tool_input = state.get("input")
        events = [
            AgentEvent(
                "ToolCall",
                {
                    "call_id": call_id,
                    "name": name,
                    "input": as_json_text(tool_input),
                    "output": None if failed else output,
                    "error": error,
                    "status": "completed"
                    if not failed
                    else ("error" if status == "error" else "incomplete"),
                },
            )
        ]
        if failed and error and error.startswith(REFUSALS):
            self.permission_denials.append(
                {
                    "tool": name,
                    "input": as_json_text(tool_input),
                    "call_id": call_id,
                    "reason": error,
                }
            )
        metadata = _object(state.get("metadata"))
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        if name == SHELL_TOOL and isinstance(command, str) and "exit" in metadata:
            # A command that ran has an exit in its metadata (null when killed); a refused one has none.
            exit_code = metadata.get("exit")
            shown = metadata.get("output") if isinstance(metadata.get("output"), str) else output
            shown = "" if shown == NO_OUTPUT else shown
            events.append(
                AgentEvent(
                    "Command",
                    {
                        "command": command,
                        "exit_code": exit_code
                        if isinstance(exit_code, int) and not isinstance(exit_code, bool)
                        else None,
                        "output": shown or "",
                        "origin": "agent",
                    },
                )
            )
        elif name in FILE_TOOLS and not failed:
            paths = changed_paths(state)
            if paths:
                events.append(
                    AgentEvent("FileChange", {"paths": [self._absolute(p) for p in paths]})
                )
        return events

    def _usage(self, tokens: Any, cost: Any = None) -> list[AgentEvent]:
        """One step's tokens, and the USD OpenCode says the step cost. OpenCode counts cache
        reads and writes apart from ``input``; Proctor's input counts every prompt token, and
        reasoning is output."""
        if not isinstance(tokens, dict):
            return []
        cache = _object(tokens.get("cache"))
        cache_read, cache_write = whole_number(cache.get("read")), whole_number(cache.get("write"))
        step = {
            "input_tokens": whole_number(tokens.get("input")) + cache_read + cache_write,
            "output_tokens": whole_number(tokens.get("output"))
            + whole_number(tokens.get("reasoning")),
            "cache_read_tokens": cache_read,
            "cache_write_tokens": cache_write,
        }
        step["total_tokens"] = step["input_tokens"] + step["output_tokens"]
        for key, value in step.items():
            self.usage[key] = self.usage.get(key, 0) + value
        data: dict[str, Any] = dict(step)
        if isinstance(cost, int | float) and not isinstance(cost, bool) and 0 <= cost < 1e9:
            data["cost_usd"] = float(cost)
        return [AgentEvent("Usage", data)]

    def _absolute(self, path: str) -> str:
        if os.path.isabs(path) or not self.cwd:
            return path
        return os.path.normpath(os.path.join(self.cwd, path))


def _error_text(error: Any) -> str:
    """An OpenCode error (a string, or ``{name, data: {message}}``) as one readable text."""
    if isinstance(error, str):
        return error
    if isinstance(error, dict):
        data = _object(error.get("data"))
        if isinstance(data.get("message"), str):
            return data["message"]
        if isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(error.get("name"), str):
            return error["name"]
    return as_json_text(error)


class OpenCodeHarness(AgentCliHarness):
    name = "opencode"
    capabilities = frozenset({CONVERSATION_RESUME, PLAN_MODE})
    executable = "opencode"
    config_dir = ".config/opencode"
    install_hint = (
        "install it with the profile's install step (npm install -g --prefix ~/.local opencode-ai) "
        "or put its folder on PATH in the profile's env"
    )

    def __init__(self, variant: Variant) -> None:
        super().__init__(variant)
        self._instructions_written = False
        # Set by the first planning turn: the whole conversation then follows the plan flow.
        self._plan_flow = False

    @classmethod
    def declares_plan_file(cls, variant: Variant) -> bool:
        return True

    def plan_file(self, sandbox: Sandbox) -> Path | None:
        """Where OpenCode tells the plan agent to write: the workspace's ``.opencode/plans``
        when it is a git repository (OpenCode's worktree), else its own data folder."""
        if (sandbox.host_workspace / ".git").exists():
            return sandbox.host_workspace / ".opencode" / "plans"
        return sandbox.host_home / ".local" / "share" / "opencode" / "plans"

    def setup(self, sandbox: Sandbox, log: RawSink) -> None:
        super().setup(sandbox, log)
        # The case's MCP mocks, in the global config beside the profile's (runner.mocks).
        write_opencode_mcp(sandbox, sandbox.host_home / self.config_dir / "opencode.json")

    def agent_env(self, sandbox: Sandbox) -> dict[str, str]:
        env = {
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
        }
        if not self.options.get("project_settings"):
            env["OPENCODE_DISABLE_PROJECT_CONFIG"] = "1"
        if self._plan_flow:
            env["OPENCODE_EXPERIMENTAL_PLAN_MODE"] = "1"
        return env

    def _write_instructions(self, sandbox: Sandbox, system_prompt: str) -> None:
        """Add the system prompt to the global AGENTS.md, after the profile's own, once."""
        rules = sandbox.host_home / self.config_dir / "AGENTS.md"
        rules.parent.mkdir(parents=True, exist_ok=True)
        existing = rules.read_text(encoding="utf-8") if rules.exists() else ""
        rules.write_text(
            (existing.rstrip("\n") + "\n\n" if existing.strip() else "") + system_prompt + "\n",
            encoding="utf-8",
        )
        self._instructions_written = True

    def command_line(self, request: TurnRequest) -> list[str]:
        argv = [self.executable, "run", "--format", "json", "--auto"]
        if request.model:
            argv += ["--model", request.model]
        if request.mode == "plan":
            argv += ["--agent", "plan"]
        elif request.mode == "act":
            argv += ["--agent", "build"]
        if request.session_id:
            argv += ["--session", request.session_id]
        argv += self.extra_args()
        # After "--", a prompt that starts with a dash is not read as a flag.
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
        system_prompt = self.system_prompt_for(request)
        if system_prompt and not self._instructions_written:
            self._write_instructions(sandbox, system_prompt)
        self._plan_flow = self._plan_flow or request.mode == "plan"
        parser = OpenCodeStreamParser(cwd=sandbox.workspace, model=request.model)
        return self.run_cli(
            sandbox,
            self.command_line(request),
            parser,
            emit=emit,
            raw=raw,
            timeout_s=timeout_s,
            session_id=request.session_id,
        )
