"""The session logs Gemini CLI keeps under ``~/.gemini/tmp/<project>/chats/``: what tool calls
returned to the model, which the stream does not say (a shell command's exit code)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.harnesses.jsonl import json_object


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
