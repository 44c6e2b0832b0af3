"""The responder: a model that answers the agent as the person who asked for the work.

It is shown only what the agent already knows (the opening prompt, its own earlier replies and
the agent's last message), never the expected output or the checks, so it cannot hand the agent
the rubric. Its reply is delivered only if it passes every rule below; otherwise the
conversation stops with a cause a person can grep for.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass

from runner.core.results import ConsultationRecord
from runner.llm import LLMConfig, LLMError, complete, parse_json_answer

MAX_REPLY_BYTES = 2000
FENCED_CODE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)
VERDICTS = ("answer", "done", "cannot_answer")

INSTRUCTIONS = """\
You stand in for the person who asked an AI agent to do a piece of work. The agent has stopped \
and is waiting for you. Decide what that person says next.

Answer as that person would:
- If the agent asks you to choose, take the option it marked as recommended; otherwise the \
simplest option that needs the least work.
- Add no requirements beyond the original request. Invent no facts you were not given.
- Write no code and no file contents. Keep it short: a sentence or two.

Reply with one JSON object and nothing else:
{"verdict": "answer" | "done" | "cannot_answer", "reply": "what you say (only for answer)", \
"reason": "one line: why"}
- "answer": the agent asked something or needs a decision; "reply" is your message.
- "done": the agent reports the work finished and is waiting on nothing.
- "cannot_answer": you could not answer without inventing something."""

PLANNING_NOTE = """\
The agent is in plan mode: it may only read and plan. Say "done" when it has presented a \
complete plan for you to approve; answer its questions otherwise."""


@dataclass
class ResponderTurn:
    """What the conversation does next: deliver ``reply``, finish, or stop with ``cause``."""

    verdict: str  # answer | done | cannot_answer | failed
    reply: str = ""
    reason: str = ""
    cause: str = ""  # set when no reply may be delivered
    record: ConsultationRecord | None = None


def consultation_messages(
    *, opening_prompt: str, earlier_replies: list[str], last_message: str, planning: bool
) -> list[dict[str, str]]:
    parts = [f"The original request:\n{opening_prompt}"]
    if earlier_replies:
        parts.append(
            "What you already replied, in order:\n" + "\n".join(f"- {r}" for r in earlier_replies)
        )
    parts.append(f"The agent's last message:\n{last_message or '(the agent said nothing)'}")
    system = INSTRUCTIONS + ("\n\n" + PLANNING_NOTE if planning else "")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


def reply_problem(reply: str, previous: str | None) -> str | None:
    """The recorded cause for a reply that must not be delivered, or None when it may be."""
    if not reply.strip():
        return "empty_reply"
    if len(reply.encode("utf-8")) > MAX_REPLY_BYTES:
        return "reply_too_long"
    if FENCED_CODE.search(reply):
        return "reply_contains_code"
    if previous is not None and reply.strip() == previous.strip():
        return "reply_repeated"
    return None


def first_line(value: object) -> str:
    """A model's reason as one line (it may send none, a number, or only whitespace)."""
    lines = str(value or "").strip().splitlines()
    return lines[0].strip() if lines else ""


def consult(
    config: LLMConfig,
    *,
    opening_prompt: str,
    earlier_replies: list[str],
    last_message: str,
    planning: bool,
    turn_index: int,
) -> ResponderTurn:
    messages = consultation_messages(
        opening_prompt=opening_prompt,
        earlier_replies=earlier_replies,
        last_message=last_message,
        planning=planning,
    )
    started = time.monotonic()
    used: dict[str, int] = {}  # the tokens of the call, once it answered

    def record(
        answer: str, verdict: str, reason: str, cause: str, model: str
    ) -> ConsultationRecord:
        return ConsultationRecord(
            kind="responder",
            prompt=messages,
            answer=answer,
            verdict=verdict,
            reason=reason,
            cause=cause,
            model=model,
            duration_ms=int((time.monotonic() - started) * 1000),
            turn_index=turn_index,
            usage=dict(used),
        )

    try:
        completion = complete(config, messages, json_mode=True)
    except LLMError as exc:
        return ResponderTurn(
            "failed",
            reason=str(exc),
            cause=exc.cause,
            record=record("", "", str(exc), exc.cause, config.model or ""),
        )
    used.update(completion.usage)
    answer = completion.text
    parsed = parse_json_answer(answer)
    if parsed is None:
        return ResponderTurn(
            "failed",
            cause="malformed_verdict",
            reason="the answer is not a JSON object",
            record=record(answer, "", "", "malformed_verdict", completion.model),
        )
    verdict = parsed.get("verdict")
    reason = first_line(parsed.get("reason"))
    if verdict is None:
        return ResponderTurn(
            "failed",
            cause="missing_verdict",
            reason=reason,
            record=record(answer, "", reason, "missing_verdict", completion.model),
        )
    if verdict not in VERDICTS:
        return ResponderTurn(
            "failed",
            cause="malformed_verdict",
            reason=f"unknown verdict {json.dumps(verdict)}",
            record=record(answer, str(verdict), reason, "malformed_verdict", completion.model),
        )
    if verdict == "cannot_answer":
        return ResponderTurn(
            "cannot_answer",
            reason=reason,
            cause="declined",
            record=record(answer, verdict, reason, "declined", completion.model),
        )
    reply = parsed.get("reply") if isinstance(parsed.get("reply"), str) else ""
    return ResponderTurn(
        verdict,
        reply=reply or "",
        reason=reason,
        record=record(answer, verdict, reason, "", completion.model),
    )
