"""The recorder interface: how the runner's core reports a trial without knowing the database.

``runner.jobs.database_recorder.DatabaseRecorder`` persists and publishes in production; ``MemoryRecorder``
keeps everything in lists for tests of the core. ``RedactingRecorder`` wraps either and is the
one place secrets are removed from what a trial reports.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from proctor.agent_events import AgentEvent
from runner.core.redaction import Redactor
from runner.core.results import CheckResult, ConsultationRecord


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

    def remote_sandbox(self, kind: str, remote_id: str) -> None:
        """The trial's sandbox lives with a provider as ``remote_id``: kept at once, for the
        reaper to kill should this worker die."""

    def turn_started(
        self, index: int, prompt: str, *, origin: dict[str, Any], mode: str
    ) -> None: ...

    def event(self, turn_index: int, event: AgentEvent) -> None: ...

    def many_events(self, turn_index: int, events: list[AgentEvent]) -> None: ...

    def raw_line(self, stream: str, line: str) -> None: ...

    def raw_lines(self, stream: str, lines: list[str]) -> None: ...

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
        self.remote_sandboxes: list[tuple[str, str]] = []

    def trial_started(self) -> None:
        self.started = True

    def remote_sandbox(self, kind: str, remote_id: str) -> None:
        self.remote_sandboxes.append((kind, remote_id))

    def turn_started(self, index: int, prompt: str, *, origin: dict[str, Any], mode: str) -> None:
        self.turns.append({"index": index, "prompt": prompt, "origin": origin, "mode": mode})

    def event(self, turn_index: int, event: AgentEvent) -> None:
        self.events.append((turn_index, event))

    def many_events(self, turn_index: int, events: list[AgentEvent]) -> None:
        self.events.extend((turn_index, event) for event in events)

    def raw_line(self, stream: str, line: str) -> None:
        self.raw.append((stream, line))

    def raw_lines(self, stream: str, lines: list[str]) -> None:
        self.raw.extend((stream, line) for line in lines)

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


class RawOutput:
    """The raw-output sink a harness is given: ``recorder.raw_line`` when called with a line,
    ``recorder.raw_lines`` for the lines of one read (a ``ManyLinesSink``)."""

    __slots__ = ("lines",)

    def __init__(self, recorder: TrialRecorder) -> None:
        self.lines = recorder.raw_lines

    def __call__(self, stream: str, line: str) -> None:
        self.lines(stream, [line])


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
    redacted field by field. The line is the event's own (``AgentEvent.line``, set by the
    harness that read it), else the last one this thread recorded.

    The lines of one read are redacted as one text first: no match in the whole means none in
    any line (each pattern matches in a line only where it also matches in the text holding it,
    a newline being no part of any match's edge), so a clean read costs one pass, not one per
    line; a read that holds a match is redacted line by line, as each line alone would be.
    """

    def __init__(self, inner: TrialRecorder, redactor: Redactor) -> None:
        self.inner = inner
        self.redactor = redactor
        # Per reading thread: the lines of its last read that were found clean (holding no
        # backslash), the redactor that found them, and the read's last line.
        self._clean = threading.local()
        # Short strings a harness adds itself ("agent", "completed"), found clean by
        # ``_clean_words_of``'s redactor: looked at once, not once per event.
        self._clean_words: set[str] = set()
        self._clean_words_of: Redactor | None = None

    def add_secrets(self, values: list[str]) -> None:
        self.redactor = self.redactor.with_secrets(values)

    def trial_started(self) -> None:
        self.inner.trial_started()

    def remote_sandbox(self, kind: str, remote_id: str) -> None:
        self.inner.remote_sandbox(kind, remote_id)

    def turn_started(self, index: int, prompt: str, *, origin: dict[str, Any], mode: str) -> None:
        r = self.redactor
        self.inner.turn_started(index, r.redact(prompt), origin=r.redact_obj(origin), mode=mode)

    def event(self, turn_index: int, event: AgentEvent) -> None:
        self.inner.event(turn_index, self._redacted(event))

    def many_events(self, turn_index: int, events: list[AgentEvent]) -> None:
        self.inner.many_events(turn_index, [self._redacted(event) for event in events])

    def _redacted(self, event: AgentEvent) -> AgentEvent:
        clean = getattr(self._clean, "lines", None)
        line = event.line if event.line is not None else getattr(self._clean, "last", None)
        data = event.data
        if (
            line is not None
            and clean is not None
            and clean[0] is self.redactor
            and line in clean[1]
        ):
            data = self._redact_unsafe(data, line)
            if data is event.data:  # the usual case: passed on as it came, not copied
                return event
        else:
            data = self.redactor.redact_obj(data)
        # Without its line, which only a clean line's event keeps.
        return AgentEvent(event.kind, data, event.at_ms)

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
        self.raw_lines(stream, [line])

    def raw_lines(self, stream: str, lines: list[str]) -> None:
        if not lines:
            return
        redactor = self.redactor
        whole = lines[0] if len(lines) == 1 else "\n".join(lines)
        if redactor.redact(whole) is whole:
            kept, clean = lines, lines
        else:
            kept = [redactor.redact(line) for line in lines]
            clean = [line for line, out in zip(lines, kept, strict=True) if out is line]
        self._clean.lines = (redactor, {line for line in clean if "\\" not in line})
        self._clean.last = lines[-1]
        self.inner.raw_lines(stream, kept)

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
