"""The production recorder: persists what a trial reports and publishes it live.

Events are buffered and bulk-written (one INSERT per flush, not per event), appended as they
arrive to the trial's ``events.jsonl``, and announced to the batch's channel group after each
flush. A busy stream flushes every FLUSH_EVERY_EVENTS events or FLUSH_EVERY_S seconds as
events arrive; a lone event (an agent that prints one message, then works for minutes) is
flushed by the recorder's flusher thread, which wakes every FLUSH_EVERY_S while the trial runs,
so every event is stored and published within about 2 × FLUSH_EVERY_S of being printed. Raw
output lines go to ``output.log`` only.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.db import connection
from django.utils import timezone

from evals_app.models import Check, Consultation, Event, Trial, Turn
from proctor.protocol import AgentEvent
from runner.core.recording import TrialOutcome
from runner.grading.checks import CheckResult
from runner.jobs import artifacts, publishing

FLUSH_EVERY_EVENTS = 64
FLUSH_EVERY_S = 0.25


class DatabaseRecorder:
    def __init__(self, trial: Trial) -> None:
        self.trial_id = trial.pk
        self.run_id = trial.run_id
        self.batch_id = trial.run.batch_id
        self.folder: Path = artifacts.trial_dir(self.batch_id, trial.pk)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._events_file = open(self.folder / "events.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._raw_file = open(self.folder / "output.log", "a", encoding="utf-8")  # noqa: SIM115
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
        Trial.objects.filter(pk=self.trial_id).update(
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
            prompt=prompt,
            origin=origin,
            mode=mode,
            started_at=timezone.now(),
        )

    def event(self, turn_index: int, event: AgentEvent) -> None:
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
        with self._lock:
            self._raw_file.write(f"[{stream}] {line}\n" if stream != "stdout" else line + "\n")

    def log(self, text: str) -> None:
        self.event(0, AgentEvent("Log", {"stream": "proctor", "text": text}))

    def turn_finished(self, index: int, *, answer: str, usage: dict[str, int]) -> None:
        self.flush()
        Turn.objects.filter(trial_id=self.trial_id, index=index).update(
            answer=answer,
            input_tokens=usage.get("input_tokens", 0),
            output_tokens=usage.get("output_tokens", 0),
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
            message=result.message,
            output=result.output,
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
        self.flush()
        self._events_file.close()
        self._raw_file.close()
        usage = outcome.usage or {}
        Trial(pk=self.trial_id).finish(
            outcome.status,
            finish_reason=outcome.finish_reason,
            error=outcome.error,
            answer=outcome.answer,
            session_id=outcome.session_id,
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
        self._announce(outcome.status)

    # --- internals -----------------------------------------------------------------------------

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


def reset_for_retry(trial: Trial) -> None:
    """Forget a trial's partial record and its artifacts so it can run again from the start."""
    trial.reset()
    shutil.rmtree(artifacts.trial_dir(trial.run.batch_id, trial.pk), ignore_errors=True)
