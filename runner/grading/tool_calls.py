"""``is-valid-openai-tools-call`` and ``is-valid-openai-function-call``: every tool the agent
called is one its variant declares, called with arguments (JSON) that match the tool's
parameter schema, as promptfoo validates an OpenAI provider's tool calls.

The calls are those the trial recorded (the chat harness's ``ToolCall`` events); a trial that
called no tool fails, as promptfoo fails an output that is not a tool call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from runner.grading.json_output import schema_problem


def tool_call_verdict(
    kind: str, calls: Sequence[Mapping[str, Any]], declared: Sequence[Mapping[str, Any]]
) -> tuple[bool, str]:
    if not calls:
        return False, "the agent called no tool"
    if not declared:
        return False, "the variant declares no tools to check the calls against"
    functions = {
        spec["name"]: spec
        for tool in declared
        if isinstance(spec := tool.get("function", tool), Mapping) and "name" in spec
    }
    checked = calls[:1] if kind == "is-valid-openai-function-call" else calls
    for call in checked:
        name = str(call.get("name"))
        spec = functions.get(name)
        if spec is None:
            return (
                False,
                f"called {name!r}, but no tool has that name (declared: {', '.join(sorted(functions))})",
            )
        raw = call.get("input", call.get("arguments"))
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError as exc:
            return False, f"the arguments of {name} are not JSON ({exc})"
        problem = schema_problem(spec.get("parameters") or {"type": "object"}, arguments)
        if problem is not None:
            return False, f"the call to {name} does not match its schema: {problem}"
    return True, f"{len(checked)} call(s) match the declared tools"
