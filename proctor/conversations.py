"""How the person's side of a conversation is supplied: a script of turns, or a responder.

Both are plain values for ``case(user=...)``. Declaring neither leaves the case one shot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DELIVER_ALWAYS = "always"
DELIVER_WHEN_AGENT_ASKS = "agent_asks"
DELIVER_WHEN = (DELIVER_ALWAYS, DELIVER_WHEN_AGENT_ASKS)
DEFAULT_RESPONDER_TURNS = 8


@dataclass(frozen=True)
class Turn:
    """One authored message, delivered after the agent's previous answer when its gate holds."""

    prompt: str
    deliver_when: str = DELIVER_ALWAYS
    agent_response_matches: str | None = None

    def to_definition(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "deliver_when": self.deliver_when,
            "agent_response_matches": self.agent_response_matches,
        }


@dataclass(frozen=True)
class Turns:
    """An authored script: exactly what the person says, in order."""

    turns: tuple[Turn, ...]

    def to_definition(self) -> dict[str, Any]:
        return {"type": "turns", "turns": [t.to_definition() for t in self.turns]}


@dataclass(frozen=True)
class Responder:
    """A model that answers the agent's questions as the person who asked for the work."""

    max_turns: int = DEFAULT_RESPONDER_TURNS
    model: str | None = None

    def to_definition(self) -> dict[str, Any]:
        return {"type": "llm", "max_turns": self.max_turns, "model": self.model}


def turn(prompt: str, *, deliver_when: str = DELIVER_ALWAYS, agent_response_matches: str | None = None) -> Turn:
    """``deliver_when="agent_asks"`` delivers only when the agent's last answer holds a question
    mark; ``agent_response_matches`` adds a regex that answer must match too."""
    return Turn(prompt=prompt, deliver_when=deliver_when, agent_response_matches=agent_response_matches)


def turns(*items: Turn | str) -> Turns:
    """A scripted conversation; a plain string is a turn delivered always."""
    return Turns(tuple(item if isinstance(item, Turn) else turn(item) for item in items))


def responder(*, max_turns: int = DEFAULT_RESPONDER_TURNS, model: str | None = None) -> Responder:
    """``max_turns`` bounds the follow-ups it may write (the opening prompt is not one)."""
    return Responder(max_turns=max_turns, model=model)
