"""Codex's ``codex exec --json`` lines, as Proctor events.

What the CLI prints (checked against 0.171.0) and what becomes of it:

- ``thread.started``: the thread id is the session id -> Started.
- ``item.completed``, by item type: ``agent_message`` -> Message; ``command_execution`` ->
  Command with its ``exit_code`` (the ``/bin/bash -lc '...'`` wrapper Codex adds is removed, so
  the command reads as the agent wrote it); ``file_change`` -> FileChange (absolute paths);
  ``mcp_tool_call``, ``web_search``, ``collab_tool_call`` -> ToolCall; ``plan`` text stands in
  for the answer when no message came. ``error`` items are warnings (an unknown model's
  metadata) and ``reasoning``, ``todo_list`` are not transcript events: all stay in the raw log.
- ``turn.completed``: usage -> Usage. Codex reports it **cumulative for the whole thread**, so
  a resumed turn's own usage is its totals minus the previous turn's (``previous_totals``).
- ``turn.failed`` and a top-level ``error``: how the turn ended. A ``declined`` command (refused
  by an approval policy a profile configured) is a permission denial, not a Command.

Token counts already follow Proctor's convention: ``input_tokens`` includes cached tokens.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from proctor.agent_events import AgentEvent
from runner.harnesses.jsonl import as_json_text, json_object, object_at, whole_number

USAGE_FIELDS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_read_tokens": "cached_input_tokens",
    "cache_write_tokens": "cache_write_input_tokens",
}
_SHELLS = {"bash", "sh", "zsh", "dash"}


def unwrap_shell(command: str) -> str:
    """``/bin/bash -lc 'ls /nope'`` -> ``ls /nope``; anything else unchanged."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if len(words) == 3 and os.path.basename(words[0]) in _SHELLS and words[1] in ("-c", "-lc"):
        return words[2]
    return command


def thread_totals(usage: dict[str, Any]) -> dict[str, int]:
    """A ``turn.completed`` usage (the thread's totals so far) in Proctor's terms."""
    totals = {ours: whole_number(usage.get(theirs)) for ours, theirs in USAGE_FIELDS.items()}
    totals["total_tokens"] = totals["input_tokens"] + totals["output_tokens"]
    return totals


def usage_since(totals: dict[str, int], previous: dict[str, int] | None) -> dict[str, int]:
    """This turn's usage: the thread's totals minus those at the end of the previous turn.

    Totals that went down (a thread compacted or restarted its count) are taken as this turn's
    own, rather than reported as negative."""
    if not previous or any(totals[key] < previous.get(key, 0) for key in totals):
        return dict(totals)
    return {key: totals[key] - previous.get(key, 0) for key in totals}


class CodexStreamParser:
    """One invocation's lines in, events out.

    ``previous_totals`` is the thread's cumulative usage after the previous turn (None on the
    first); after the turn, ``totals`` holds the new cumulative usage to pass next time.
    """

    def __init__(
        self,
        *,
        cwd: str | None = None,
        model: str | None = None,
        previous_totals: dict[str, int] | None = None,
    ) -> None:
        self.cwd = cwd
        self.model = model
        self.previous_totals = previous_totals
        self.session_id: str | None = None
        self.answer = ""
        self.usage: dict[str, int] = {}
        self.totals: dict[str, int] | None = None
        self.finish_reason: str | None = None
        self.permission_denials: list[dict[str, Any]] = []
        self._plan: str | None = None
        self._error: str | None = None

    def feed(self, line: str) -> list[AgentEvent]:
        obj = json_object(line)
        if obj is None:
            return []
        kind = obj.get("type")
        if kind == "thread.started" and isinstance(obj.get("thread_id"), str):
            self.session_id = obj["thread_id"]
            return [AgentEvent("Started", {"session_id": self.session_id, "model": self.model})]
        if kind == "item.completed" and isinstance(obj.get("item"), dict):
            return self._item(obj["item"])
        if kind == "turn.completed":
            return self._turn_completed(obj.get("usage"))
        if kind == "turn.failed":
            error = object_at(obj, "error")
            message = str(error.get("message") or self._error or "").strip()
            self.finish_reason = f"failed: {message[:300]}" if message else "failed"
        elif kind == "error" and isinstance(obj.get("message"), str):
            self._error = obj["message"]
        return []

    def finish(self) -> list[AgentEvent]:
        """What the end of the process settles: the plan as the answer when no message came,
        and an error the CLI reported without failing the turn."""
        events = []
        if not self.answer and self._plan:
            self.answer = self._plan
            events.append(
                AgentEvent("Message", {"role": "assistant", "text": self._plan, "usage": None})
            )
        if self.finish_reason is None and self._error:
            self.finish_reason = f"error: {self._error.strip()[:300]}"
        return events

    # --- items -----------------------------------------------------------------------------------

    def _item(self, item: dict[str, Any]) -> list[AgentEvent]:
        kind = item.get("type")
        if kind == "agent_message" and isinstance(item.get("text"), str):
            self.answer = item["text"]
            return [
                AgentEvent("Message", {"role": "assistant", "text": item["text"], "usage": None})
            ]
        if kind == "command_execution" and isinstance(item.get("command"), str):
            if item.get("status") == "declined":  # refused by Codex's approval policy: never ran
                self.permission_denials.append(
                    {
                        "tool": "command_execution",
                        "input": unwrap_shell(item["command"]),
                        "call_id": item.get("id"),
                    }
                )
                return []
            exit_code = item.get("exit_code")
            return [
                AgentEvent(
                    "Command",
                    {
                        "command": unwrap_shell(item["command"]),
                        "exit_code": exit_code
                        if isinstance(exit_code, int) and not isinstance(exit_code, bool)
                        else None,
                        "output": str(item.get("aggregated_output") or ""),
                        "origin": "agent",
                    },
                )
            ]
        if kind == "file_change":
            if item.get("status") != "completed":
                return []
            paths = [
                self._absolute(c["path"])
                for c in item.get("changes") or []
                if isinstance(c, dict) and isinstance(c.get("path"), str)
            ]
            return [AgentEvent("FileChange", {"paths": paths})] if paths else []
        if kind == "mcp_tool_call":
            return [self._mcp_call(item)]
        if kind == "web_search":
            return [
                self._tool_call(
                    item, "web_search", {"query": item.get("query"), "action": item.get("action")}
                )
            ]
        if kind == "collab_tool_call":
            name = str(item.get("tool") or "collab_tool_call")
            tool_input = {
                k: item.get(k) for k in ("prompt", "receiver_thread_ids") if item.get(k) is not None
            }
            return [self._tool_call(item, name, tool_input, status=item.get("status"))]
        if kind == "plan" and isinstance(item.get("text"), str):
            self._plan = item["text"]
        return []

    def _mcp_call(self, item: dict[str, Any]) -> AgentEvent:
        name = f"mcp__{item.get('server') or '?'}__{item.get('tool') or '?'}"
        result = item.get("result")
        output = None
        if isinstance(result, dict):
            content = result.get("content")
            texts = [
                c.get("text", "")
                for c in content or []
                if isinstance(c, dict) and c.get("type") == "text"
            ]
            output = (
                "\n".join(texts)
                if texts
                else as_json_text(result.get("structured_content") or content)
            )
        error = item.get("error")
        if isinstance(error, dict):
            error = error.get("message") or as_json_text(error)
        return self._tool_call(
            item,
            name,
            item.get("arguments"),
            output=output,
            error=None if error is None else str(error),
            status=item.get("status"),
        )

    def _tool_call(
        self,
        item: dict[str, Any],
        name: str,
        tool_input: Any,
        *,
        output: str | None = None,
        error: str | None = None,
        status: Any = "completed",
    ) -> AgentEvent:
        return AgentEvent(
            "ToolCall",
            {
                "call_id": item.get("id") if isinstance(item.get("id"), str) else None,
                "name": name,
                "input": as_json_text(tool_input),
                "output": output,
                "error": error,
                "status": status if isinstance(status, str) else None,
            },
        )

    def _turn_completed(self, usage: Any) -> list[AgentEvent]:
        self.finish_reason = "completed"
        if not isinstance(usage, dict):
            return []
        self.totals = thread_totals(usage)
        self.usage = usage_since(self.totals, self.previous_totals)
        return [AgentEvent("Usage", dict(self.usage))]

    def _absolute(self, path: str) -> str:
        if os.path.isabs(path) or not self.cwd:
            return path
        return os.path.normpath(os.path.join(self.cwd, path))
