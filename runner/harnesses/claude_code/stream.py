"""Claude Code's ``--output-format stream-json`` lines, as Proctor events.

What the CLI prints (checked against 2.1.197) and what becomes of it:

- ``system``/``init``: the session id and model -> Started.
- ``assistant``: one line per content block, several sharing one ``message.id``; the text blocks
  of one message are merged into one Message, emitted when the next message (or anything else)
  begins. ``tool_use`` blocks wait for their result. Per-block usage is partial and ignored, and
  so is the text of a line marked ``error`` (the CLI's stand-in for a failed API call).
- ``user`` with ``tool_result``: the finished tool call -> ToolCall. For ``Bash``, also a Command:
  exit code 0 on success, ``Exit code N`` at the start of an error; a refused or blocked command
  (an error without an exit code) never ran, so it gets no Command. ``Write``/``Edit``/
  ``MultiEdit``/``NotebookEdit`` that succeed -> FileChange with the absolute path.
- ``result``: the totals for the whole invocation -> Usage; ``result`` as the final assistant
  Message when no message said it already; ``permission_denials``; how the turn ended.

Token counts follow Proctor's convention that ``input_tokens`` counts every prompt token:
Anthropic reports cache reads and writes apart from ``input_tokens``, so they are added in.
"""

from __future__ import annotations

import os
import re
from typing import Any

from proctor.agent_events import AgentEvent
from runner.harnesses.jsonl import as_json_text, json_object, object_at, whole_number

FILE_TOOLS = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
_EXIT_CODE = re.compile(r"^(?:Error: )?Exit code (-?\d+)")


def exit_code_of_error(text: str) -> int | None:
    """The exit code Claude Code puts at the start of a failed Bash result, if any."""
    match = _EXIT_CODE.match(text)
    return int(match.group(1)) if match else None


def usage_of_result(usage: dict[str, Any]) -> dict[str, int]:
    """A ``result`` line's usage in Proctor's terms (input includes cached tokens)."""
    cache_read = whole_number(usage.get("cache_read_input_tokens"))
    cache_write = whole_number(usage.get("cache_creation_input_tokens"))
    input_tokens = whole_number(usage.get("input_tokens")) + cache_read + cache_write
    output_tokens = whole_number(usage.get("output_tokens"))
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_tokens": cache_read,
        "cache_write_tokens": cache_write,
        "total_tokens": input_tokens + output_tokens,
    }


def _tool_result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            block.get("text", "")
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
        )
    return "" if content is None else as_json_text(content)


class ClaudeStreamParser:
    """One invocation's lines in, events out. ``cwd`` makes relative file paths absolute."""

    def __init__(self, *, cwd: str | None = None) -> None:
        self.cwd = cwd
        self.session_id: str | None = None
        self.model: str | None = None
        self.answer = ""
        self.usage: dict[str, int] = {}
        self.finish_reason: str | None = None
        self.permission_denials: list[dict[str, Any]] = []
        self._started = False
        self._message_id: str | None = None
        self._texts: list[str] = []
        self._pending: dict[str, tuple[str, Any]] = {}

    # --- feeding ---------------------------------------------------------------------------------

    def feed(self, line: str) -> list[AgentEvent]:
        obj = json_object(line)
        if obj is None:
            return []
        events: list[AgentEvent] = []
        kind = obj.get("type")
        message = object_at(obj, "message")
        if kind != "assistant" or message.get("id") != self._message_id:
            events += self._flush_message()
        if isinstance(obj.get("session_id"), str) and not self._started:
            self._started = True
            self.session_id = obj["session_id"]
            self.model = (
                obj.get("model") if kind == "system" and isinstance(obj.get("model"), str) else None
            )
            events.append(
                AgentEvent("Started", {"session_id": self.session_id, "model": self.model})
            )
        if kind == "assistant":
            self._assistant(obj, message)
        elif kind == "user":
            events += self._tool_results(obj, message)
        elif kind == "result":
            events += self._result(obj)
        return events

    def finish(self) -> list[AgentEvent]:
        """Flush what the process left unfinished (a timeout): its last message, and tool calls
        that never got a result."""
        events = self._flush_message()
        for call_id, (name, tool_input) in self._pending.items():
            events.append(
                AgentEvent(
                    "ToolCall",
                    {
                        "call_id": call_id,
                        "name": name,
                        "input": as_json_text(tool_input),
                        "output": None,
                        "error": None,
                        "status": "incomplete",
                    },
                )
            )
        self._pending.clear()
        return events

    # --- line kinds ------------------------------------------------------------------------------

    def _assistant(self, obj: dict[str, Any], message: dict[str, Any]) -> None:
        self._message_id = message.get("id")
        # A subagent's words are not the answer, and neither is the CLI's own stand-in message
        # for a failed API call (marked with "error"): the result line reports that failure.
        spoken = obj.get("parent_tool_use_id") is None and not obj.get("error")
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and spoken and block.get("text"):
                self._texts.append(block["text"])
            elif block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                self._pending[block["id"]] = (str(block.get("name") or "?"), block.get("input"))

    def _flush_message(self) -> list[AgentEvent]:
        self._message_id = None
        if not self._texts:
            return []
        text = "\n\n".join(self._texts)
        self._texts = []
        self.answer = text
        return [AgentEvent("Message", {"role": "assistant", "text": text, "usage": None})]

    def _tool_results(self, obj: dict[str, Any], message: dict[str, Any]) -> list[AgentEvent]:
        content = message.get("content")
        if not isinstance(content, list):
            return []  # a plain user message (a replayed prompt), not a tool result
        results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        # The structured result describes the line's only tool result.
        structured = obj.get("tool_use_result") if len(results) == 1 else None
        events: list[AgentEvent] = []
        for block in results:
            call_id = (
                block.get("tool_use_id") if isinstance(block.get("tool_use_id"), str) else None
            )
            name, tool_input = self._pending.pop(call_id or "", ("?", None))
            text = _tool_result_text(block.get("content"))
            is_error = bool(block.get("is_error"))
            events.append(
                AgentEvent(
                    "ToolCall",
                    {
                        "call_id": call_id,
                        "name": name,
                        "input": as_json_text(tool_input),
                        "output": None if is_error else text,
                        "error": text if is_error else None,
                        "status": "error" if is_error else "completed",
                    },
                )
            )
            tool_input = tool_input if isinstance(tool_input, dict) else {}
            if name == "Bash":
                events += self._command(tool_input, text, is_error, structured)
            elif name in FILE_TOOLS and not is_error:
                path = tool_input.get(FILE_TOOLS[name])
                if isinstance(path, str) and path:
                    events.append(AgentEvent("FileChange", {"paths": [self._absolute(path)]}))
        return events

    def _command(
        self, tool_input: dict[str, Any], text: str, is_error: bool, structured: Any
    ) -> list[AgentEvent]:
        command = tool_input.get("command")
        if not isinstance(command, str):
            return []
        if is_error:
            exit_code = exit_code_of_error(text)
            if exit_code is None:
                return []  # refused or blocked before it ran
            output = text.split("\n", 1)[1] if "\n" in text else ""
        else:
            exit_code = 0
            output = text
            if isinstance(structured, dict):
                parts = [structured.get("stdout"), structured.get("stderr")]
                output = "\n".join(p.rstrip("\n") for p in parts if isinstance(p, str) and p)
                if structured.get("interrupted"):
                    exit_code = None
        return [
            AgentEvent(
                "Command",
                {"command": command, "exit_code": exit_code, "output": output, "origin": "agent"},
            )
        ]

    def _result(self, obj: dict[str, Any]) -> list[AgentEvent]:
        events: list[AgentEvent] = []
        if isinstance(obj.get("session_id"), str):
            self.session_id = obj["session_id"]
        is_error = bool(obj.get("is_error"))
        subtype = str(obj.get("subtype") or "")
        result = obj.get("result")
        text = result if isinstance(result, str) else ""
        if is_error or subtype != "success":
            first_line = text.strip().splitlines()[0][:300] if text.strip() else ""
            reason = subtype if subtype and subtype != "success" else "error"
            self.finish_reason = f"{reason}: {first_line}" if first_line else reason
        else:
            self.finish_reason = "completed"
            if text and text != self.answer:
                self.answer = text
                events.append(
                    AgentEvent("Message", {"role": "assistant", "text": text, "usage": None})
                )
        for denial in obj.get("permission_denials") or []:
            if isinstance(denial, dict):
                self.permission_denials.append(
                    {
                        "tool": denial.get("tool_name"),
                        "input": as_json_text(denial.get("tool_input")),
                        "call_id": denial.get("tool_use_id"),
                    }
                )
        if isinstance(obj.get("usage"), dict):
            self.usage = usage_of_result(obj["usage"])
            data: dict[str, Any] = dict(self.usage)
            cost = obj.get("total_cost_usd")
            # What Claude Code says the invocation cost (its own price table).
            if isinstance(cost, int | float) and not isinstance(cost, bool) and 0 <= cost < 1e9:
                data["cost_usd"] = float(cost)
            events.append(AgentEvent("Usage", data))
        return events

    def _absolute(self, path: str) -> str:
        if os.path.isabs(path) or not self.cwd:
            return path
        return os.path.normpath(os.path.join(self.cwd, path))
