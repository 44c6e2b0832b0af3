"""The conversation as validators and artifacts read it: turns with what happened in each.

What a trial keeps in memory is capped like what it stores (PROCTOR_MAX_TRIAL_EVENTS): past
``max_events`` messages, commands, tool calls and file changes, further ones are counted in
``Transcript.events_not_kept`` instead of kept, so an agent printing a million events leaves
worker memory bounded. Totals stay exact past the cap (usage, cost, finish reason) and so does
each turn's answer (the last assistant message, kept aside).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proctor.agent_events import AgentEvent

USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


@dataclass
class EventBudget:
    """How many list entries the turns of one transcript may still keep; None: no cap."""

    limit: int | None = None
    kept: int = 0
    dropped: int = 0

    def take(self) -> bool:
        if self.limit is not None and self.kept >= self.limit:
            self.dropped += 1
            return False
        self.kept += 1
        return True


@dataclass
class TurnTranscript:
    index: int
    prompt: str
    origin: dict[str, Any] = field(default_factory=dict)
    mode: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    file_changes: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_KEYS, 0))
    finish_reason: str = ""
    cost_usd: float | None = None
    _usage_events_seen: bool = field(default=False, repr=False)
    budget: EventBudget = field(default_factory=EventBudget, repr=False, compare=False)
    _last_answer: str | None = field(default=None, repr=False, compare=False)

    @property
    def answer(self) -> str:
        """The turn's last assistant message."""
        if self._last_answer is not None:
            return self._last_answer
        for message in reversed(self.messages):
            if message["role"] == "assistant":
                return message["text"]
        return ""

    def add(self, event: AgentEvent) -> None:
        data = event.data
        kind = event.kind
        if kind in ("Message", "Command", "ToolCall", "FileChange") and not self.budget.take():
            if kind == "Message" and data["role"] == "assistant":
                self._last_answer = data["text"]
            if kind == "Message" and data.get("usage") and not self._usage_events_seen:
                self._add_usage(data["usage"])
            return
        if event.kind == "Message":
            self.messages.append({"role": data["role"], "text": data["text"]})
            if data["role"] == "assistant":
                self._last_answer = data["text"]
            # Usage attached to messages counts only while the turn printed no Usage line,
            # so an agent that reports both is not counted twice.
            if data.get("usage") and not self._usage_events_seen:
                self._add_usage(data["usage"])
        elif event.kind == "Command":
            self.commands.append(dict(data))
        elif event.kind == "ToolCall":
            self.tool_calls.append(dict(data))
        elif event.kind == "FileChange":
            self.file_changes.extend(data["paths"])
        elif event.kind == "Usage":
            # Usage folded in from the agent's telemetry (``source``) holds only what the
            # stream lacked: it adds to the turn's count and never replaces it.
            if not self._usage_events_seen and not data.get("source"):
                self._usage_events_seen = True
                self.usage = dict.fromkeys(USAGE_KEYS, 0)
            self._add_usage(data)
            if isinstance(data.get("cost_usd"), int | float):
                self.cost_usd = (self.cost_usd or 0.0) + float(data["cost_usd"])
        elif event.kind == "Finished" and not self.finish_reason:
            self.finish_reason = data["reason"]

    def _add_usage(self, usage: dict[str, int]) -> None:
        for key in USAGE_KEYS:
            self.usage[key] += int(usage.get(key, 0))

    def to_json(self) -> dict[str, Any]:
        # Built by hand: asdict deep-copies every event's dict, most of writing conversation.json
        # for a long stream, only for json.dumps to read it once.
        return {
            "index": self.index,
            "prompt": self.prompt,
            "origin": self.origin,
            "mode": self.mode,
            "messages": self.messages,
            "commands": self.commands,
            "tool_calls": self.tool_calls,
            "file_changes": self.file_changes,
            "usage": dict(self.usage),
            "finish_reason": self.finish_reason,
            "cost_usd": self.cost_usd,
            "answer": self.answer,
        }


@dataclass
class Transcript:
    turns: list[TurnTranscript] = field(default_factory=list)
    # A recorded conversation the agent continued from (role/content), before turn 0.
    seeded: list[dict[str, str]] = field(default_factory=list)
    # The most messages, commands, tool calls and file changes kept over all turns (None: all).
    max_events: int | None = None
    budget: EventBudget = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.budget = EventBudget(self.max_events)

    @property
    def events_not_kept(self) -> int:
        return self.budget.dropped

    def start_turn(
        self, prompt: str, *, origin: dict[str, Any] | None = None, mode: str = ""
    ) -> TurnTranscript:
        turn = TurnTranscript(
            index=len(self.turns), prompt=prompt, origin=origin or {}, mode=mode, budget=self.budget
        )
        self.turns.append(turn)
        return turn

    @property
    def answer(self) -> str:
        """The agent's last assistant message across the whole conversation."""
        for turn in reversed(self.turns):
            if turn.answer:
                return turn.answer
        return ""

    def text(self) -> str:
        """Every assistant message, joined: what a validator searches for a claim."""
        return "\n\n".join(
            m["text"] for turn in self.turns for m in turn.messages if m["role"] == "assistant"
        )

    def cost_usd(self) -> float | None:
        """What the harness reported the turns cost (Usage ``cost_usd``), None when it did not."""
        costs = [turn.cost_usd for turn in self.turns if turn.cost_usd is not None]
        return sum(costs) if costs else None

    def usage(self) -> dict[str, int]:
        total = dict.fromkeys(USAGE_KEYS, 0)
        for turn in self.turns:
            for key in USAGE_KEYS:
                total[key] += turn.usage[key]
        return total
