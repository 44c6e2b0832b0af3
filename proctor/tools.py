"""Tools for chat agents: a JSON-schema definition the model sees, and a Python stub that
answers in words when the model calls it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    stub: Callable[..., Any] | None = None

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


def tool(
    name: str,
    *,
    description: str = "",
    parameters: Mapping[str, Any] | None = None,
    stub: Callable[..., Any] | None = None,
) -> Tool:
    """``tool("schedule_appointment", parameters={...}, stub=lambda args: "Booked for 3pm.")``.

    The stub receives the call's arguments as a dict and returns what the model reads back;
    return natural-language text, not JSON, so an echo of it reads naturally.
    """
    return Tool(
        name=name,
        description=description,
        parameters=dict(parameters or {"type": "object", "properties": {}}),
        stub=stub,
    )
