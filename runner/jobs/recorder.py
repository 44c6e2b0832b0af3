"""The production recorder: persists what a trial reports and publishes it live.

Events are buffered and bulk-written (one INSERT per flush, not per event), appended as they
arrive to the trial's ``events.jsonl``, and announced to the batch's channel group after each
flush. A busy stream flushes every FLUSH_EVERY_EVENTS events or FLUSH_EVERY_S seconds as
events arrive; a lone event (an agent that prints one message, then works for minutes) is
flushed by the recorder's flusher thread, which wakes every FLUSH_EVERY_S while the trial runs,
so every event is stored and published within about 2 × FLUSH_EVERY_S of being printed. Raw
output lines go to ``output.log`` only.

Everything stored is made safe and capped here (issue 11): each event passes through
``proctor.protocol.storable_event`` (NUL, lone surrogates, 64-bit numbers, ``at`` in range,
each text field capped at PROCTOR_MAX_EVENT_FIELD_BYTES, default 64 KiB); ``output.log`` keeps
PROCTOR_MAX_OUTPUT_LOG_BYTES (default 100 MiB), then a truncation mark and, at the end, the
count of bytes not kept; a trial keeps PROCTOR_MAX_TRIAL_EVENTS agent events (default 100,000),
then one Log event saying how many were dropped (Proctor's own notes are always kept). Answers,
errors, prompts and check output lose NUL and lone surrogates and are capped like a field.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from evals_app.models import Check, Consultation, Event, Trial, Turn
from proctor.protocol import MAX_INT64, AgentEvent, storable_event, storable_text, truncation_mark
from runner.core.recording import TrialOutcome
from runner.grading.checks import CheckResult
from runner.jobs import artifacts, publishing

FLUSH_EVERY_EVENTS = 64
FLUSH_EVERY_S = 0.25


class DatabaseRecorder:
    def __init__(self, trial: Trial, *, owner: str | None = None) -> None:
        self.trial_id = trial.pk
        # The lease the run holds: the trial's end is recorded only while it still does.
        self.owner = owner
        self.run_id = trial.run_id
        self.batch_id = trial.run.batch_id
        self.folder: Path = artifacts.trial_dir(self.batch_id, trial.pk)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._events_file = open(self.folder / "events.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._raw_file = open(self.folder / "output.log", "ab")  # noqa: SIM115
        self._max_field_bytes: int = settings.PROCTOR_MAX_EVENT_FIELD_BYTES
        self._max_raw_bytes: int = settings.PROCTOR_MAX_OUTPUT_LOG_BYTES
        self._max_events: int = settings.PROCTOR_MAX_TRIAL_EVENTS
        self._raw_bytes = self._raw_file.tell()
        self._raw_dropped = 0
        self._events_dropped = 0
        self._pending: list[Event] = []
        self._seq = Event.objects.filter(trial_id=trial.pk).count()
        self._last_flush = time.monotonic()
        self._lock = threading.Lock()  # stdout and stderr pumps report from two threads
        # One flush at a time, so events are published in the order of their seq.
        self._flush_lock = threading.Lock()
        self._stopped = threading.Event()
        self._flusher: threading.Thread | None = None

    # --- the TrialRecorder interface ---------------------------------------------------------

    def trial_started(self) -> None:
        rows = Trial.objects.filter(pk=self.trial_id)
        if self.owner is not None:
            rows = rows.filter(lease_owner=self.owner)
        rows.update(
            status=Trial.Status.RUNNING, started_at=timezone.now(), artifacts_dir=str(self.folder)
        )
        self._announce(Trial.Status.RUNNING)
        self._flusher = threading.Thread(
            target=self._flush_lone_events, name=f"proctor-flush-{self.trial_id}", daemon=True
        )
        self._flusher.start()

    def turn_started(self, index: int, prompt: str, *, origin: dict[str, Any], mode: str) -> None:
        self.flush()
        Turn.objects.create(
            trial_id=self.trial_id,
            index=index,
            prompt=storable_text(prompt),
            origin=origin,
            mode=mode,
            started_at=timezone.now(),
        )

    def event(self, turn_index: int, event: AgentEvent) -> None:
        with self._lock:
            if self._seq >= self._max_events:
                self._events_dropped += 1  # counted, not kept: see _note_dropped_events
                return
        self._store(turn_index, event)

    def _store(self, turn_index: int, event: AgentEvent) -> None:
        event = storable_event(event, max_field_bytes=self._max_field_bytes)
        with self._lock:
            self._events_file.write(
                json.dumps({"turn": turn_index, **event.to_json()}, ensure_ascii=False) + "\n"
            )
            self._pending.append(
                Event(
                    trial_id=self.trial_id,
                    turn_index=turn_index,
                    seq=self._seq,
                    kind=event.kind,
                    at=datetime.fromtimestamp(event.at_ms / 1000, tz=UTC),
                    data=event.data,
                )
            )
            self._seq += 1
            due = (
                len(self._pending) >= FLUSH_EVERY_EVENTS
                or time.monotonic() - self._last_flush >= FLUSH_EVERY_S
            )
        if due:
            self.flush()

    def raw_line(self, stream: str, line: str) -> None:
        prefix = b"" if stream == "stdout" else f"[{stream}] ".encode()
        # An ASCII line past the cap is counted without being copied (a 100 MB line is not
        # encoded only to be dropped).
        size = len(prefix) + len(line) + 1 if line.isascii() else None
        data = b""
        if size is None or self._raw_bytes + size <= self._max_raw_bytes:
            data = prefix + line.encode("utf-8", "replace") + b"\n"
            size = len(data)
        with self._lock:
            if self._raw_file.closed:
                return
            if data and self._raw_bytes + size <= self._max_raw_bytes:
                self._raw_file.write(data)
                self._raw_bytes += size
                return
            if not self._raw_dropped:
                self._raw_file.write(
                    f"… [truncated: output.log keeps {self._max_raw_bytes} bytes "
                    f"(PROCTOR_MAX_OUTPUT_LOG_BYTES); the rest is counted, not kept]\n".encode()
                )
            self._raw_dropped += size

    def log(self, text: str) -> None:
        # Proctor's own notes are kept past the event cap: they say why a trial ended.
        self._store(0, AgentEvent("Log", {"stream": "proctor", "text": text}))

    def turn_finished(self, index: int, *, answer: str, usage: dict[str, int]) -> None:
        self.flush()
        Turn.objects.filter(trial_id=self.trial_id, index=index).update(
            answer=storable_text(answer, max_bytes=self._max_field_bytes),
            input_tokens=_bigint(usage.get("input_tokens", 0)),
            output_tokens=_bigint(usage.get("output_tokens", 0)),
            finished_at=timezone.now(),
        )

    def check(self, index: int, result: CheckResult) -> None:
        Check.objects.create(
            trial_id=self.trial_id,
            index=index,
            name=result.name[:300],
            kind=result.kind,
            passed=result.passed,
            score=result.score,
            weight=result.weight,
            metric=result.metric[:100],
            message=storable_text(result.message, max_bytes=self._max_field_bytes),
            output=storable_text(result.output, max_bytes=self._max_field_bytes),
            source_ref=result.source_ref,
            duration_ms=result.duration_ms,
        )

    def artifact(self, relative_path: str, text: str) -> None:
        artifacts.write_text(self.folder, relative_path, text)

    def consultation(self, record) -> None:
        """A responder, judge or simulated-user call: a row for the dashboard, and its prompt
        and verdict as files (responder/turn-<n>/, judges/check-<i>/) for audit."""
        Consultation.objects.create(
            trial_id=self.trial_id,
            kind=record.kind,
            turn_index=record.turn_index,
            check_index=record.check_index,
            model=record.model[:200],
            prompt=record.prompt,
            answer=record.answer,
            verdict=record.verdict[:40],
            reason=record.reason,
            cause=record.cause[:40],
            duration_ms=record.duration_ms,
        )
        if record.kind == "judge":
            folder = f"judges/check-{record.check_index}"
        else:
            folder = f"{'responder' if record.kind == 'responder' else 'simulated-user'}/turn-{record.turn_index}"
        self.artifact(
            f"{folder}/prompt.json", json.dumps(record.prompt, indent=2, ensure_ascii=False)
        )
        self.artifact(
            f"{folder}/verdict.json",
            json.dumps(
                {
                    "verdict": record.verdict,
                    "reason": record.reason,
                    "cause": record.cause or None,
                    "model": record.model,
                    "answer": record.answer,
                },
                indent=2,
                ensure_ascii=False,
            ),
        )

    def trial_finished(self, outcome: TrialOutcome) -> None:
        self._stop_flusher()
        self._note_dropped_events()
        self.flush()
        self._events_file.close()
        with self._lock:
            if self._raw_dropped:
                self._raw_file.write(
                    f"{truncation_mark(self._raw_dropped)} not kept in output.log, capped at "
                    f"{self._max_raw_bytes} bytes\n".encode()
                )
            self._raw_file.close()
        usage = {
            k: _bigint(v) if isinstance(v, int) else v for k, v in (outcome.usage or {}).items()
        }
        recorded = Trial(pk=self.trial_id).finish(
            outcome.status,
            owner=self.owner,
            finish_reason=storable_text(outcome.finish_reason),
            error=storable_text(outcome.error, max_bytes=self._max_field_bytes),
            answer=storable_text(outcome.answer, max_bytes=self._max_field_bytes),
            session_id=storable_text(outcome.session_id),
            conversation_outcome=outcome.conversation_outcome,
            stop_cause=outcome.stop_cause,
            responder_cause=outcome.responder_cause,
            plan_state=outcome.plan_state,
            plan_signal=outcome.plan_signal,
            outside_writes=outcome.outside_writes,
            usage=usage,
            score=outcome.score,
            threshold=outcome.threshold,
            duration_ms=outcome.duration_ms,
        )
        if recorded:
            self._announce(outcome.status)

    # --- internals -----------------------------------------------------------------------------

    def _note_dropped_events(self) -> None:
        if self._events_dropped:
            self._store(
                0,
                AgentEvent(
                    "Log",
                    {
                        "stream": "proctor",
                        "text": f"{self._events_dropped} more events were dropped: a trial keeps "
                        f"at most {self._max_events} (PROCTOR_MAX_TRIAL_EVENTS).",
                    },
                ),
            )
            self._events_dropped = 0

    def flush(self) -> None:
        with self._flush_lock:
            with self._lock:
                pending, self._pending = self._pending, []
                self._last_flush = time.monotonic()
                if not self._events_file.closed:
                    self._events_file.flush()
            if not pending:
                return
            Event.objects.bulk_create(pending)
            publishing.event_recorded(
                trial_id=self.trial_id, batch_id=self.batch_id, seq=pending[-1].seq
            )

    def _flush_lone_events(self) -> None:
        """The flusher thread: writes events that waited FLUSH_EVERY_S with none after them.
        A busy stream has flushed them already, so it costs that stream nothing."""
        try:
            while not self._stopped.wait(FLUSH_EVERY_S):
                if self._pending and time.monotonic() - self._last_flush >= FLUSH_EVERY_S:
                    self.flush()
        finally:
            connection.close()  # this thread's own database connection

    def _stop_flusher(self) -> None:
        self._stopped.set()
        if self._flusher is not None:
            self._flusher.join(timeout=30)

    def _announce(self, status: str) -> None:
        publishing.trial_changed(
            trial_id=self.trial_id, run_id=self.run_id, batch_id=self.batch_id, status=status
        )


def _bigint(value: object) -> int:
    """A token count as a bigint column holds it: sums of huge counts are clamped."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return min(max(value, 0), MAX_INT64)


def reset_for_retry(trial: Trial) -> None:
    """Forget a trial's partial record and its artifacts so it can run again from the start."""
    trial.reset()
    shutil.rmtree(artifacts.trial_dir(trial.run.batch_id, trial.pk), ignore_errors=True)
