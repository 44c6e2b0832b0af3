"""How the person's side of a conversation is supplied: a script of turns, or a responder.

Both are plain values for ``case(user=...)``. Declaring neither leaves the case one shot.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor.definitions import DefinitionError, a_type

DELIVER_ALWAYS = "always"
DELIVER_WHEN_AGENT_ASKS = "agent_asks"
DELIVER_WHEN = (DELIVER_ALWAYS, DELIVER_WHEN_AGENT_ASKS)
DEFAULT_RESPONDER_TURNS = 8


@dataclass(frozen=True)
class Turn:
    """One authored message, delivered after the agent's previous answer when its gate holds.

    A turn given ``variables`` (and no prompt) asks the case's prompt again, filled with them
    over the case's: a variant carrying its own prompt asks that one. Its prompt is filled when
    the case is recorded."""

    prompt: str | None
    deliver_when: str = DELIVER_ALWAYS
    agent_response_matches: str | None = None
    variables: Mapping[str, str] | None = None

    def to_definition(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "deliver_when": self.deliver_when,
            "agent_response_matches": self.agent_response_matches,
            # Only when set, so a turn of text keeps its case's version.
            **({"variables": dict(self.variables)} if self.variables is not None else {}),
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


def turn(
    prompt: str | None = None,
    *,
    deliver_when: str = DELIVER_ALWAYS,
    agent_response_matches: str | None = None,
    variables: Mapping[str, str] | None = None,
) -> Turn:
    """``deliver_when="agent_asks"`` delivers only when the agent's last answer holds a question
    mark; ``agent_response_matches`` adds a regex that answer must match too. ``variables``
    in place of the prompt asks the case's prompt (or its variant's) again, filled with them
    over the case's variables: the next question of the same template."""
    return Turn(
        prompt=prompt,
        deliver_when=deliver_when,
        agent_response_matches=agent_response_matches,
        variables=variables,
    )


def turns(*items: Turn | str) -> Turns:
    """A scripted conversation; a plain string is a turn delivered always. The turns may also
    come as one list: ``turns(["first", "second"])``."""
    if len(items) == 1 and isinstance(items[0], list | tuple):
        items = tuple(items[0])
    return Turns(tuple(item if isinstance(item, Turn) else turn(item) for item in items))


def responder(*, max_turns: int = DEFAULT_RESPONDER_TURNS, model: str | None = None) -> Responder:
    """``max_turns`` bounds the follow-ups it may write: neither the opening prompt nor a
    plan-mode approval is one. The case's own ``max_turns`` counts the same follow-ups and must
    not be smaller (see docs/conversations.md)."""
    return Responder(max_turns=max_turns, model=model)


@dataclass(frozen=True)
class SimulatedUser:
    """A model playing a persona against the agent, reacting to what the agent says.

    The conversation ends when the agent says ``###STOP###``, the simulated user wraps up
    (it says ``###STOP###`` itself), or ``max_turns`` of its messages have been sent.
    ``initial_messages`` seed the conversation (role/content dicts, or ``"file://path.json"``);
    they do not count against ``max_turns``.

    ``persona_opens`` runs it as promptfoo's simulated user: the persona writes every message,
    its first included (no first message, no case prompt sent), and seeded messages ending
    with the person's are answered by the agent before the persona speaks.
    """

    instructions: str
    first_message: str | None = None
    max_turns: int = DEFAULT_RESPONDER_TURNS
    model: str | None = None
    initial_messages: tuple[tuple[str, str], ...] = ()
    persona_opens: bool = False

    def to_definition(self) -> dict[str, Any]:
        definition = {
            "type": "simulated_user",
            "instructions": self.instructions,
            "first_message": self.first_message,
            "max_turns": self.max_turns,
            "model": self.model,
            "initial_messages": [{"role": r, "content": c} for r, c in self.initial_messages],
        }
        if self.persona_opens is not False:  # only then, so other cases keep their versions
            definition["persona_opens"] = self.persona_opens
        return definition


STOP_MARKER = "###STOP###"


def simulated_user(
    instructions: str,
    *,
    first_message: str | None = None,
    max_turns: int = DEFAULT_RESPONDER_TURNS,
    model: str | None = None,
    initial_messages: Any = None,
    persona_opens: bool = False,
) -> SimulatedUser:
    """A persona for ``case(user=...)``. A relative ``file://`` path for ``initial_messages``
    is read relative to the calling file, when the eval is defined. ``persona_opens=True``:
    the persona writes the first message too, as promptfoo's simulated user does."""
    given = "initial_messages"
    if isinstance(initial_messages, str):
        given = f"initial_messages {initial_messages}"
        initial_messages = _load_messages(
            initial_messages, sys._getframe(1).f_globals.get("__file__")
        )
    return SimulatedUser(
        instructions=instructions,
        first_message=first_message,
        max_turns=max_turns,
        model=model,
        initial_messages=_seeded(initial_messages, given),
        persona_opens=persona_opens,
    )


def _seeded(messages: Any, given: str) -> tuple[tuple[str, str], ...]:
    """(role, content) pairs of the seed messages; a shape that holds none is refused here,
    where the file and line of the call are known (the role is checked with the case)."""
    if messages is None:
        return ()
    if not isinstance(messages, list | tuple):
        raise DefinitionError(
            f'{given} must be a list of {{"role", "content"}} messages or "file://path.json" '
            f"(got {a_type(messages)})"
        )
    seeded = []
    for position, message in enumerate(messages, start=1):
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            raise DefinitionError(
                f'{given}: message {position} must be a {{"role", "content"}} object '
                f"(got {message!r:.80})"
            )
        if not isinstance(message["content"], str):
            raise DefinitionError(
                f"{given}: message {position}'s content must be text (got {message['content']!r:.80})"
            )
        seeded.append((str(message["role"]), message["content"]))
    return tuple(seeded)


def _load_messages(reference: str, caller: str | None) -> Any:
    path = Path(reference.removeprefix("file://"))
    if not path.is_absolute():
        path = (Path(caller).resolve().parent if caller else Path.cwd()) / path
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DefinitionError(
            f"initial_messages {reference}: cannot read {path} ({exc.strerror or exc})"
        ) from None
    except ValueError as exc:
        raise DefinitionError(f"initial_messages {reference}: {path} is not JSON ({exc})") from None
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        data = data["messages"]
    if not isinstance(data, list):
        raise DefinitionError(
            f'initial_messages {reference}: {path} must hold a list of {{"role", "content"}} '
            'objects (or {"messages": [...]})'
        )
    return data
