"""The simulated user: a model playing the eval's persona against the agent.

It sees the conversation from the person's side (its own messages as ``assistant``, the
agent's as ``user``), reacts only to what the agent says, and ends the conversation by saying
``###STOP###`` when its business is done.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from proctor.conversations import STOP_MARKER, SimulatedUser
from runner.core.results import ConsultationRecord
from runner.llm import LLMConfig, LLMError, complete

RULES = f"""\
You are role-playing a person talking to an agent (a support, sales or booking assistant, or a \
coding agent). Stay in the persona below for the whole conversation.

- Be reactive: answer what the agent asks; do not lead the conversation or volunteer extra.
- Write only what the person would say next: plain words, one or two sentences, no stage \
directions, never the agent's side.
- Once your main need is met (or clearly will not be), wrap up politely. When you have \
nothing left to say, reply with exactly {STOP_MARKER}.

Persona:
"""


# What a persona that opens the conversation is shown before anything was said.
OPENING_REQUEST = "(The conversation begins. Write the person's first message.)"


@dataclass
class SimulatedReply:
    text: str  # what the person says ("" when they only stopped)
    stop: bool  # the simulated user ended the conversation
    cause: str = ""  # set when no reply could be had
    record: ConsultationRecord | None = None


def persona_messages(user: SimulatedUser, history: list[tuple[str, str]]) -> list[dict[str, str]]:
    """The consultation: the persona, then the conversation with roles seen from the person."""
    messages = [{"role": "system", "content": RULES + user.instructions.strip()}]
    if not history:
        # A persona that opens: it is asked for its first message, as a chat model answers.
        messages.append({"role": "user", "content": OPENING_REQUEST})
    for speaker, text in history:
        messages.append({"role": "assistant" if speaker == "person" else "user", "content": text})
    return messages


def next_message(
    user: SimulatedUser, config: LLMConfig, history: list[tuple[str, str]], *, turn_index: int
) -> SimulatedReply:
    messages = persona_messages(user, history)
    started = time.monotonic()
    try:
        completion = complete(config, messages)
    except LLMError as exc:
        record = ConsultationRecord(
            kind="simulated_user",
            prompt=messages,
            answer="",
            verdict="",
            reason=str(exc),
            cause=exc.cause,
            model=config.model or "",
            duration_ms=int((time.monotonic() - started) * 1000),
            turn_index=turn_index,
        )
        return SimulatedReply("", stop=False, cause=exc.cause, record=record)
    text = completion.text.strip()
    stop = STOP_MARKER in text
    said = text.replace(STOP_MARKER, "").strip()
    record = ConsultationRecord(
        kind="simulated_user",
        prompt=messages,
        answer=completion.text,
        verdict="stop" if stop else "reply",
        reason="",
        cause="" if said or stop else "empty_reply",
        model=completion.model,
        duration_ms=completion.duration_ms,
        turn_index=turn_index,
        usage=completion.usage,
    )
    return SimulatedReply(said, stop=stop, cause=record.cause, record=record)
