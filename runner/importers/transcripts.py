"""Recorded conversations as simulated-user cases (the format: docs/conversations.md).

Each ``*.json`` in a folder is one recorded conversation: a list of ``{role, content}``
messages, or ``{"messages": [...], "outcome": "..."}`` (``disposition`` is accepted for
``outcome``). Each becomes a case whose simulated user plays the caller: a persona the model
writes from the recording, the caller's first message, and a generous hard ceiling of turns.
It is graded like the reference's generated tests: a weighted table of assertions (a leak of
serialized objects weighs most; latency is information only) passing at 0.6, where the
disposition rubric asks for the recorded ending and the turn-efficiency rubric carries the turn
target (twice the caller's turns, at most 15) as a soft signal, "ideally within N turns".
Messages the agent sent before the caller first spoke (a greeting), and with ``seed_turns`` the
first exchanges too, seed the conversation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.importers.handles import UniqueHandles, slugify
from runner.importers.python_source import Call, Module, Name, Spread, call, identifier_for
from runner.llm import LLMConfig, LLMError, complete, parse_json_answer

MAX_TURNS_CAP = 15
# The hard ceiling when --max-turns is not given: above any turn target, so the target stays
# a soft signal graded by a rubric and the ceiling only stops a conversation that is circling.
DEFAULT_CEILING = 20
THRESHOLD = 0.6
OPENING_LINE = "Hello."
METRIC = "disposition-outcome"
SHARED_NAME = "shared_assertions"
SHARED = Name(SHARED_NAME)
# (type, value, weight, metric): the reference's weighted table, less the two rubrics written
# per case (disposition 2, turn efficiency 0.5).
SHARED_ASSERTIONS = (
    ("not-icontains", "[object Object]", 3, "no-json-leak"),
    (
        "llm-rubric",
        "The agent sounds warm and professional throughout: natural sentences, not robotic.",
        2,
        "tone",
    ),
    (
        "llm-rubric",
        "The agent stays in its role as the business's assistant, never claims to be a person "
        "and never writes the caller's lines.",
        1.5,
        "role-adherence",
    ),
    (
        "llm-rubric",
        "The agent remembers what the caller already said (name, issue, details) and does not "
        "ask for it again.",
        1.5,
        "knowledge-retention",
    ),
    (
        "llm-rubric",
        "Once the caller's business is done, the agent tries to bring the conversation to a "
        "natural close.",
        0.5,
        "closing-attempt",
    ),
    ("latency", 60_000, 0, "latency"),
)
# How recordings from other tools name the two sides.
CALLER_ROLES = {"user", "human", "caller", "customer", "lead", "client"}
AGENT_ROLES = {"assistant", "agent", "ai", "bot"}
IGNORED_ROLES = {"system", "tool", "function", "developer"}
# The two directives every persona carries, and how to tell the model already wrote them.
REACTIVE_DIRECTIVE = (
    "Stay reactive: answer what the agent asks, and do not steer the conversation yourself."
)
WRAP_UP_DIRECTIVE = (
    "Once your main question has been dealt with, start bringing the call to a close."
)
_SAYS_REACTIVE = re.compile(r"\breactive\b|only (?:respond|answer|reply)", re.IGNORECASE)
_SAYS_WRAP_UP = re.compile(
    r"wrap(?:ping)?[- ]up|bring(?:ing)? the (?:call|conversation) to a close|"
    r"(?:end|close) the (?:call|conversation)",
    re.IGNORECASE,
)

PERSONA_PROMPT = """\
You read a recorded conversation between a caller and an agent (sales, support, booking) and \
describe the caller so another model can play them in a new conversation with the agent.

Write the instructions in the second person ("You are ..."): who the caller is, what they \
want and why, facts they gave (names, dates, numbers, preferences), constraints and \
objections, and how they talk (tone, patience, length of replies). Describe the person, not \
the transcript: do not quote the agent, and do not tell them what the agent will say. Include \
that they are reactive (they answer what the agent asks and do not lead), and that once their \
main question is resolved they start wrapping up.

Answer with a JSON object only: {"instructions": "..."}"""


class TranscriptError(Exception):
    """One recording could not become a case; the message says why in one sentence."""


@dataclass
class Transcript:
    path: Path
    messages: list[tuple[str, str]]  # ("user" | "assistant", text), in order
    outcome: str | None

    @property
    def caller_turns(self) -> int:
        return sum(1 for role, _ in self.messages if role == "user")

    def split(self, seed_turns: int = 0) -> tuple[list[tuple[str, str]], str, int]:
        """(seeded messages, the caller's first new message, the caller's turns from there).

        The agent's greeting and the first ``seed_turns`` exchanges (a caller message and what
        the agent said after it) are seeded; the caller message after them opens the case."""
        callers = [i for i, (role, _) in enumerate(self.messages) if role == "user"]
        if seed_turns >= len(callers):
            raise TranscriptError(
                f"has {len(callers)} caller message{'s' if len(callers) != 1 else ''}; "
                f"--seed-turns {seed_turns} needs at least {seed_turns + 1}"
            )
        opening = callers[seed_turns]
        return self.messages[:opening], self.messages[opening][1], len(callers) - seed_turns


@dataclass
class TranscriptImport:
    source: str
    cases: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file name, reason)


def read_transcript(path: Path) -> Transcript:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise TranscriptError(f"cannot be read ({exc})") from None
    except ValueError as exc:
        raise TranscriptError(f"is not valid JSON ({exc})") from None
    outcome = None
    if isinstance(data, dict):
        given = {key: data[key] for key in ("outcome", "disposition") if data.get(key) is not None}
        if len(given) == 2 and given["outcome"] != given["disposition"]:
            raise TranscriptError("has both an outcome and a disposition; keep one")
        for key, value in given.items():
            if not isinstance(value, str):
                raise TranscriptError(f"has a {key} that is not text")
            outcome = value
        data = data.get("messages")
    if not isinstance(data, list):
        raise TranscriptError(
            'must hold a list of {role, content} messages, or {"messages": [...], "outcome": "..."}'
        )
    messages = []
    for position, message in enumerate(data, start=1):
        if not isinstance(message, dict) or "role" not in message:
            raise TranscriptError(f"message {position} is not a {{role, content}} object")
        role = str(message["role"]).lower()
        content = message.get("content")
        # None is a real recording's (OpenAI's assistant message that only called a tool).
        if content is not None and not isinstance(content, str | list):
            raise TranscriptError(
                f"message {position} has content {content!r}; write it as text"
                ' (or a list of {"type": "text", "text": ...} parts)'
            )
        text = _text(content)
        if role in IGNORED_ROLES or not text:
            continue
        if role in CALLER_ROLES:
            messages.append(("user", text))
        elif role in AGENT_ROLES:
            messages.append(("assistant", text))
        else:
            raise TranscriptError(
                f"message {position} has role {message['role']!r}; use user or assistant"
            )
    if not any(role == "user" for role, _ in messages):
        raise TranscriptError("holds no message from the caller (role user)")
    return Transcript(
        path=path, messages=messages, outcome=(outcome.strip() or None) if outcome else None
    )


def _text(content: Any) -> str:
    """Message text; OpenAI's list-of-parts content is joined."""
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        parts = [part.get("text", "") for part in content if isinstance(part, dict)]
        return "\n".join(p for p in parts if isinstance(p, str) and p).strip()
    return ""


def persona_request(transcript: Transcript) -> list[dict[str, str]]:
    """What the model is asked: the recorded conversation, the caller's side marked."""
    lines = [
        f"{'CALLER' if role == 'user' else 'AGENT'}: {text}" for role, text in transcript.messages
    ]
    outcome = f"\n\nHow the call ended: {transcript.outcome}" if transcript.outcome else ""
    return [
        {"role": "system", "content": PERSONA_PROMPT},
        {"role": "user", "content": "Recorded conversation:\n\n" + "\n\n".join(lines) + outcome},
    ]


def infer_instructions(transcript: Transcript, config: LLMConfig) -> str:
    """The caller's persona, written by the model; blocks for one model call."""
    try:
        completion = complete(config, persona_request(transcript), json_mode=True)
    except LLMError as exc:
        raise TranscriptError(f"the model could not be asked ({exc.message})") from None
    answer = parse_json_answer(completion.text) or {}
    instructions = answer.get("instructions")
    if not isinstance(instructions, str) or not instructions.strip():
        raise TranscriptError('the model\'s answer held no {"instructions": "..."}')
    return with_directives(instructions.strip())


def with_directives(instructions: str) -> str:
    """The persona with both directives, adding whichever the model left out."""
    missing = []
    if not _SAYS_REACTIVE.search(instructions):
        missing.append(REACTIVE_DIRECTIVE)
    if not _SAYS_WRAP_UP.search(instructions):
        missing.append(WRAP_UP_DIRECTIVE)
    return "\n".join([instructions, *missing])


def turn_target(caller_turns: int, ceiling: int) -> int:
    """The soft turn target: twice the caller's turns, at most 15 (and never past the ceiling)."""
    return min(2 * caller_turns, MAX_TURNS_CAP, ceiling)


def efficiency_rubric(target: int) -> str:
    return (
        "The conversation reaches its conclusion in a reasonable number of turns, ideally "
        f"within {target} turns of the caller. A longer conversation that is still making "
        "progress is a weaker result, not a failure."
    )


def outcome_rubric(outcome: str | None) -> str:
    if outcome:
        return f"The conversation ends the way the recorded one did: {outcome}"
    return (
        "The agent works out what the caller needs and handles it: accurate answers, a helpful "
        "manner, and a sensible close to the conversation."
    )


def transcript_case(
    transcript: Transcript,
    instructions: str,
    case_id: str,
    *,
    ceiling: int = DEFAULT_CEILING,
    seed_turns: int = 0,
    shared: Name = SHARED,
) -> Call:
    seeded_messages, first_message, caller_turns = transcript.split(seed_turns)
    seeded = [{"role": role, "content": text} for role, text in seeded_messages] or None
    user = call(
        "simulated_user",
        instructions,
        first_message=first_message,
        max_turns=ceiling,
        initial_messages=seeded,
    )
    return call(
        "case",
        case_id,
        name=transcript.path.name,
        user=user,
        validate=[
            Spread(shared),
            call(
                "assertion",
                "llm-rubric",
                outcome_rubric(transcript.outcome),
                weight=2,
                metric=METRIC,
            ),
            call(
                "assertion",
                "llm-rubric",
                efficiency_rubric(turn_target(caller_turns, ceiling)),
                weight=0.5,
                metric="turn-efficiency",
            ),
        ],
        threshold=THRESHOLD,
    )


def transcript_files(folder: Path) -> list[Path]:
    return sorted(path for path in folder.glob("*.json") if path.is_file())


def cases_from_transcripts(
    paths: list[Path],
    *,
    suite_id: str,
    config: LLMConfig,
    agent_model: str,
    ceiling: int = DEFAULT_CEILING,
    seed_turns: int = 0,
    on_progress: Callable[[Path, str | None], None] | None = None,
) -> TranscriptImport:
    """The eval file for these recordings; one model call each. A recording that cannot be read,
    has too few caller messages for ``seed_turns``, or whose persona the model does not give is
    skipped with its reason. ``ceiling`` is each simulated user's hard ``max_turns``.
    ``on_progress`` hears of each file (with the reason when it was skipped)."""
    handles = UniqueHandles()
    result = TranscriptImport(source="")
    cases = []
    for path in paths:
        try:
            transcript = read_transcript(path)
            transcript.split(seed_turns)  # too short to seed: skipped before the model is asked
            instructions = infer_instructions(transcript, config)
        except TranscriptError as exc:
            result.skipped.append((path.name, str(exc)))
            if on_progress:
                on_progress(path, str(exc))
            continue
        case_id = handles.take(slugify(path.name.removesuffix(".json"), fallback="conversation"))
        cases.append(
            transcript_case(
                transcript, instructions, case_id, ceiling=ceiling, seed_turns=seed_turns
            )
        )
        result.cases.append(case_id)
        if on_progress:
            on_progress(path, None)
    if not cases:
        return result
    module = Module(
        header=[
            "Simulated-user cases from recorded conversations (`proctor cases from-transcripts`).",
            "",
            "Each case's persona was written by a model from one recording; read and adjust them.",
            "Point the chat variant at the agent under test (system_prompt, tools, base_url).",
            "A case passes when the weighted score of its assertions reaches its threshold",
            "(weight 0 is information only); the turn target is a rubric, max_turns the ceiling.",
        ],
    )
    module.assign(
        SHARED_NAME,
        [
            call("assertion", kind, value, weight=weight, metric=metric)
            for kind, value, weight, metric in SHARED_ASSERTIONS
        ],
    )
    suite_name = identifier_for(suite_id, fallback="suite")
    module.assign(
        suite_name if suite_name != SHARED_NAME else f"{suite_name}_suite",
        call(
            "suite",
            suite_id,
            prompt=OPENING_LINE,
            variants=[call("variant", "chat", model=agent_model)],
            cases=cases,
        ),
    )
    result.source = module.source()
    return result
