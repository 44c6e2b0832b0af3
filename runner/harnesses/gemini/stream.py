"""Gemini CLI's ``--output-format stream-json`` lines, as Proctor events.

What the CLI prints and what becomes of it:

- ``init``: the session id and model -> Started.
- ``message`` from the assistant: text deltas, merged into one Message until anything else
  arrives.
- ``tool_use`` waits for its ``tool_result`` -> ToolCall; a refusal (policy, permission, a path
  outside the workspace) is also a permission denial. A ``run_shell_command`` that ran is also a
  Command; ``write_file`` and ``replace`` that succeed -> FileChange with the absolute path.
- ``error`` -> Log; ``result`` -> Usage and how the turn ended. Other types are skipped.

The stream hides shell exit codes (a failing command is still a ``success``): they are only in
the text the CLI sent the model, which its session log keeps (``session_log``). The parser asks
for that text through a callable, so it reads no files itself.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from proctor.agent_events import AgentEvent
from runner.harnesses.jsonl import as_json_text, json_object, whole_number

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
