"""The recorder interface: how the runner's core reports a trial without knowing the database.

``runner.jobs.recorder.DatabaseRecorder`` persists and publishes in production; ``MemoryRecorder``
keeps everything in lists for tests of the core. ``RedactingRecorder`` wraps either and is the
one place secrets are removed from what a trial reports.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from proctor.protocol import AgentEvent
from runner.core.redaction import Redactor
from runner.grading.checks import CheckResult
from runner.llm import ConsultationRecord


@dataclass
class TrialOutcome:
    status: str  # passed | failed | timed_out | errored
    finish_reason: str = ""
    error: str = ""
    answer: str = ""
    session_id: str = ""
    conversation_outcome: str = ""
    stop_cause: str = ""
    responder_cause: str = ""
    plan_state: str = ""
    plan_signal: str = ""
    outside_writes: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    score: float | None = None
    threshold: float | None = None
    duration_ms: int = 0


class TrialRecorder(Protocol):
    def trial_started(self) -> None: ...

    def turn_started(
        self, index: int, prompt: str, *, origin: dict[str, Any], mode: str
    ) -> None: ...

    def event(self, turn_index: int, event: AgentEvent) -> None: ...

    def raw_line(self, stream: str, line: str) -> None: ...

    def log(self, text: str) -> None: ...

    def turn_finished(self, index: int, *, answer: str, usage: dict[str, int]) -> None: ...

    def check(self, index: int, result: CheckResult) -> None: ...

    def artifact(self, relative_path: str, text: str) -> None: ...

    def consultation(self, record: ConsultationRecord) -> None: ...

    def trial_finished(self, outcome: TrialOutcome) -> None: ...


class MemoryRecorder:
    """Keeps what a trial reported, in order; for tests and for callers with no database."""

    def __init__(self) -> None:
        self.started = False
        self.turns: list[dict[str, Any]] = []
        self.events: list[tuple[int, AgentEvent]] = []
        self.raw: list[tuple[str, str]] = []
        self.logs: list[str] = []
        self.checks: list[CheckResult] = []
        self.artifacts: dict[str, str] = {}
        self.consultations: list[ConsultationRecord] = []
        self.outcome: TrialOutcome | None = None

    def trial_started(self) -> None:
        self.started = True

    def turn_started(self, index: int, prompt: str, *, origin: dict[str, Any], mode: str) -> None:
        self.turns.append({"index": index, "prompt": prompt, "origin": origin, "mode": mode})

    def event(self, turn_index: int, event: AgentEvent) -> None:
        self.events.append((turn_index, event))

    def raw_line(self, stream: str, line: str) -> None:
        self.raw.append((stream, line))

    def log(self, text: str) -> None:
        self.logs.append(text)

    def turn_finished(self, index: int, *, answer: str, usage: dict[str, int]) -> None:
        self.turns[index].update(answer=answer, usage=usage)

    def check(self, index: int, result: CheckResult) -> None:
        self.checks.append(result)

    def artifact(self, relative_path: str, text: str) -> None:
        self.artifacts[relative_path] = text

    def consultation(self, record: ConsultationRecord) -> None:
        self.consultations.append(record)

    def trial_finished(self, outcome: TrialOutcome) -> None:
        self.outcome = outcome

    def everything_said(self) -> str:
        """All text the trial reported, for tests that prove a secret appears nowhere."""
        parts = [repr(self.turns), repr(self.events), repr(self.raw), repr(self.logs)]
        parts += (
            [repr(c) for c in self.checks] + list(self.artifacts.values()) + [repr(self.outcome)]
        )
        parts += [repr(c) for c in self.consultations]
        return "\n".join(parts)


# Harness-made strings remembered as clean: short ones, and not too many of them.
MAX_REMEMBERED_WORD = 64
MAX_REMEMBERED_WORDS = 1_000


class RedactingRecorder:
    """Passes everything to ``inner`` after removing secrets; ``redactor`` may grow mid-trial
    (prepare's return value becomes known only after prepare ran).

    An agent's event is redacted once, as its raw line: when the line needed no redaction and
    holds no backslash (so no JSON escape can hide a secret's characters), every string of the
    event parsed from it that appears in the line verbatim between quotes is a whole JSON string
    of a clean line, and redacting it again would find nothing; so is a string the line holds
    as it is that starts with ``{`` or ``[`` and ends with ``}`` or ``]`` (a tool's input the
    parser made JSON text again), as whatever matched inside it would have matched in the line.
    Such events pass as they are; any other (a string the harness made up, an escaped line) is
    redacted field by field.
    """

    def __init__(self, inner: TrialRecorder, redactor: Redactor) -> None:
        self.inner = inner
        self.redactor = redactor
        # Per reading thread: the last raw line found clean, and the redactor that found it.
        self._clean = threading.local()
        # Short strings a harness adds itself ("agent", "completed"), found clean by
        # ``_clean_words_of``'s redactor: looked at once, not once per event.
        self._clean_words: set[str] = set()
        self._clean_words_of: Redactor | None = None

    def add_secrets(self, values: list[str]) -> None:
        self.redactor = self.redactor.with_secrets(values)

    def trial_started(self) -> None:
        self.inner.trial_started()

    def turn_started(self, index: int, prompt: str, *, origin: dict[str, Any], mode: str) -> None:
        r = self.redactor
        self.inner.turn_started(index, r.redact(prompt), origin=r.redact_obj(origin), mode=mode)

    def event(self, turn_index: int, event: AgentEvent) -> None:
        clean = getattr(self._clean, "line", None)
        data = event.data
        if clean is None or clean[1] is not self.redactor:
            data = self.redactor.redact_obj(data)
        else:
            data = self._redact_unsafe(data, clean[0])
        # Unchanged (the usual case): passed on as it came, not copied.
        self.inner.event(
            turn_index, event if data is event.data else AgentEvent(event.kind, data, event.at_ms)
        )

    def _redact_unsafe(self, obj: Any, line: str) -> Any:
        """``obj`` with only its strings that are not :meth:`_safe` redacted; ``obj`` itself
        when all are (the usual case: nothing is copied)."""
        if isinstance(obj, str):
            return obj if self._safe(obj, line) else self.redactor.redact(obj)
        if isinstance(obj, dict):
            out = None
            for key, value in obj.items():
                # The usual fields inline (this runs for every event): a string the line
                # shows between quotes, and values that are never redacted.
                kind = type(value)
                if kind is str:
                    if not value or f'"{value}"' in line or self._clean_text(value, line):
                        continue
                    kept = self.redactor.redact(value)
                elif value is None or kind is int or kind is float or kind is bool:
                    continue
                else:
                    kept = self._redact_unsafe(value, line)
                if kept is not value:
                    if out is None:
                        out = dict(obj)
                    out[key] = kept
            return obj if out is None else out
        if isinstance(obj, list | tuple):
            items = [self._redact_unsafe(value, line) for value in obj]
            if all(a is b for a, b in zip(items, obj, strict=True)):
                return obj
            return items if isinstance(obj, list) else tuple(items)
        return obj

    def _safe(self, obj: Any, line: str) -> bool:
        """Whether every string in ``obj`` is a whole JSON string of the clean ``line``, a JSON
        object or list the line holds as it is (a tool's input made text again), or a short
        string known clean (see the class docstring); dict keys and other values are never
        redacted, so they do not count."""
        if isinstance(obj, str):
            return not obj or f'"{obj}"' in line or self._clean_text(obj, line)
        if isinstance(obj, dict):
            return all(self._safe(value, line) for value in obj.values())
        if isinstance(obj, list | tuple):
            return all(self._safe(value, line) for value in obj)
        return True

    def _clean_text(self, text: str, line: str) -> bool:
        """Whether ``text``, which the clean ``line`` does not show as a whole JSON string, is
        clean all the same: a JSON object or list the line holds as it is (a tool's input made
        text again), or a short string found clean before."""
        # No shape's match begins at "{" or "[", and none looks past the closing "}" or "]"
        # (the text's own last character): a match inside the text is one in the line too.
        if text[0] in "{[" and text[-1] in "}]" and text in line:
            return True
        if self._clean_words_of is not self.redactor:
            self._clean_words, self._clean_words_of = set(), self.redactor
        if text in self._clean_words:
            return True
        if (
            len(text) <= MAX_REMEMBERED_WORD
            and len(self._clean_words) < MAX_REMEMBERED_WORDS
            and self.redactor.redact(text) is text
        ):
            self._clean_words.add(text)
            return True
        return False

    def raw_line(self, stream: str, line: str) -> None:
        redacted = self.redactor.redact(line)
        self._clean.line = (line, self.redactor) if redacted is line and "\\" not in line else None
        self.inner.raw_line(stream, redacted)

    def log(self, text: str) -> None:
        self.inner.log(self.redactor.redact(text))

    def turn_finished(self, index: int, *, answer: str, usage: dict[str, int]) -> None:
        self.inner.turn_finished(index, answer=self.redactor.redact(answer), usage=usage)

    def check(self, index: int, result: CheckResult) -> None:
        r = self.redactor
        result.name, result.message, result.output = (
            r.redact(result.name),
            r.redact(result.message),
            r.redact(result.output),
        )
        self.inner.check(index, result)

    def artifact(self, relative_path: str, text: str) -> None:
        self.inner.artifact(relative_path, self.redactor.redact(text))

    def consultation(self, record: ConsultationRecord) -> None:
        r = self.redactor
        record.prompt = r.redact_obj(record.prompt)
        record.answer, record.reason = r.redact(record.answer), r.redact(record.reason)
        self.inner.consultation(record)

    def trial_finished(self, outcome: TrialOutcome) -> None:
        r = self.redactor
        outcome.answer, outcome.error = r.redact(outcome.answer), r.redact(outcome.error)
        outcome.outside_writes = [r.redact(path) for path in outcome.outside_writes]
        outcome.finish_reason, outcome.session_id = (
            r.redact(outcome.finish_reason),
            r.redact(outcome.session_id),
        )
        self.inner.trial_finished(outcome)
