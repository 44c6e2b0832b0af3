"""The production recorder: what a trial reports, made safe, capped, and handed to the trial's
fenced buffer (``runner.jobs.fenced_buffer``), which writes it under the trial's lease.

Everything stored is made safe and capped here (issue 11): each event passes through
``proctor.agent_events.storable_event`` (NUL, lone surrogates, 64-bit numbers, ``at`` in range,
each text field capped at PROCTOR_MAX_EVENT_FIELD_BYTES, default 64 KiB); ``output.log`` keeps
PROCTOR_MAX_OUTPUT_LOG_BYTES (default 100 MiB), then a truncation mark and, at the end, the
count of bytes not kept; a trial keeps PROCTOR_MAX_TRIAL_EVENTS agent events (default 100,000),
then one Log event saying how many were dropped (Proctor's own notes are always kept). Answers,
errors, prompts and check output lose NUL and lone surrogates and are capped like a field.

Once the buffer finds the trial's lease gone, nothing more of the trial is written: no rows,
no ``output.log`` lines, no artifacts (the folder is the new holder's).
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.utils import timezone

from evals_app.cost import trial_cost_usd
from evals_app.models import Check, Consultation, Trial, Turn
from proctor.agent_events import (
    MAX_INT64,
    AgentEvent,
    storable_event,
    storable_text,
    truncation_mark,
)
from runner.core.reporting import TrialOutcome
from runner.core.results import CheckResult
from runner.jobs import artifact_paths, event_rows, publishing
from runner.jobs.fenced_buffer import FencedBuffer
from runner.jobs.mock_call_rows import is_mock_log, mock_call_row

RAW_BUFFER_BYTES = 1024 * 1024


class DatabaseRecorder:
    def __init__(
        self,
        trial: Trial,
        *,
        owner: str,
        on_lost: Callable[[], None] | None = None,
        events_stored: int | None = None,
    ) -> None:
        """Record ``trial``, which ``owner`` (a process's lease identity: ``leases.owner()``)
        holds: every write is made only while it still does. ``events_stored``: how many
        events the trial has stored already, where the caller knows it (a claimed trial has
        none); counted in the database otherwise."""
        self.trial_id = trial.pk
        self.run_id = trial.run_id
        self.batch_id = trial.run.batch_id
        self.variant = trial.run.variant
        self.folder = artifact_paths.trial_dir(self.batch_id, trial.pk)
        self.folder.mkdir(parents=True, exist_ok=True)
        # A large buffer: each write that reaches the disk lets the flusher thread take the
        # GIL from the reader, so fewer, larger writes keep the reader reading.
        self._raw_file = open(  # noqa: SIM115
            self.folder / "output.log", "ab", buffering=RAW_BUFFER_BYTES
        )
        self._raw_lock = threading.Lock()  # stdout and stderr pumps write from two threads
        self._max_field_bytes: int = settings.PROCTOR_MAX_EVENT_FIELD_BYTES
        self._max_raw_bytes: int = settings.PROCTOR_MAX_OUTPUT_LOG_BYTES
        self._max_events: int = settings.PROCTOR_MAX_TRIAL_EVENTS
        self._raw_bytes = self._raw_file.tell()
        self._raw_dropped = 0
        self.buffer = FencedBuffer(
            trial.pk,
            owner=owner,
            batch_id=self.batch_id,
            folder=self.folder,
            lease_s=settings.PROCTOR_LEASE_S,
            events_stored=(
                event_rows.events_stored(trial.pk) if events_stored is None else events_stored
            ),
            on_lost=on_lost,
            after_flush=self._flush_raw_file,
        )
        # Set once another process holds the trial (or nobody does): nothing more is written.
        self.lost = self.buffer.lost
        self._cost_lock = threading.Lock()
        # What the harness said the trial cost (Usage cost_usd), None while it said nothing.
        self._reported_cost: float | None = None

    # --- the TrialRecorder interface ---------------------------------------------------------

    def trial_started(self) -> None:
        # The claim already made the row running, with its start time. The artifacts folder is
        # recorded by the trial's first fenced write (a flush's renewal, or its final row), so a
        # short trial costs no transaction of its own here.
        self._announce(Trial.Status.RUNNING)
        self.buffer.start_flushing()

    def remote_sandbox(self, kind: str, remote_id: str) -> None:
        # Written now, not with the next flush: the worker may die before that.
        Trial.add_remote_sandbox(self.trial_id, kind, remote_id)

    def turn_started(self, index: int, prompt: str, *, origin: dict[str, Any], mode: str) -> None:
        self.buffer.add_turn(
            Turn(
                trial_id=self.trial_id,
                index=index,
                prompt=storable_text(prompt),
                origin=origin,
                mode=mode,
                started_at=timezone.now(),
            )
        )

    def event(self, turn_index: int, event: AgentEvent) -> None:
        self.many_events(turn_index, [event])

    def many_events(self, turn_index: int, events: list[AgentEvent]) -> None:
        """Buffer an agent's events (a read's at once): past the trial's cap they are counted
        instead of kept, and a full buffer makes the reader wait for the flusher."""
        for event in events:
            if event.kind == "Usage":
                # Counted before the cap, so a dropped Usage event still counts its cost.
                cost = event.data.get("cost_usd")
                if isinstance(cost, int | float) and not isinstance(cost, bool):
                    with self._cost_lock:
                        self._reported_cost = (self._reported_cost or 0.0) + float(cost)
        # The seq only grows: past the cap already, no event need be made storable.
        if self.buffer.next_seq < self._max_events:
            max_bytes = self._max_field_bytes
            events = [storable_event(event, max_field_bytes=max_bytes) for event in events]
        self.buffer.add_events(turn_index, events, keep_at_most=self._max_events)

    def _note(self, event: AgentEvent) -> None:
        """Buffer one of Proctor's own notes: kept past the cap."""
        self.buffer.add_events(0, [storable_event(event, max_field_bytes=self._max_field_bytes)])

    def raw_line(self, stream: str, line: str) -> None:
        prefix = b"" if stream == "stdout" else f"[{stream}] ".encode()
        # An ASCII line past the cap is counted without being copied (a 100 MB line is not
        # encoded only to be dropped).
        size = len(prefix) + len(line) + 1 if line.isascii() else None
        data = b""
        if size is None or self._raw_bytes + size <= self._max_raw_bytes:
            data = prefix + line.encode("utf-8", "replace") + b"\n"
            size = len(data)
        with self._raw_lock:
            if self._raw_file.closed or self.lost.is_set():
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

    def raw_lines(self, stream: str, lines: list[str]) -> None:
        """The lines of one read, written as one piece while output.log has room for it (the
        piece that reaches the cap goes line by line, so the cap falls where it would)."""
        prefix = "" if stream == "stdout" else f"[{stream}] "
        text = prefix + f"\n{prefix}".join(lines) + "\n"
        if text.isascii() and self._raw_bytes + len(text) > self._max_raw_bytes:
            data = b""  # not encoded only to be dropped
        else:
            data = text.encode("utf-8", "replace")
        with self._raw_lock:
            if self._raw_file.closed or self.lost.is_set():
                return
            if data and self._raw_bytes + len(data) <= self._max_raw_bytes:
                self._raw_file.write(data)
                self._raw_bytes += len(data)
                return
        for line in lines:
            self.raw_line(stream, line)

    def _flush_raw_file(self) -> None:
        """output.log on disk keeps up with the events (after each flush)."""
        with self._raw_lock:
            if not self._raw_file.closed:
                self._raw_file.flush()

    def log(self, text: str) -> None:
        # Proctor's own notes are kept past the event cap: they say why a trial ended.
        self._note(AgentEvent("Log", {"stream": "proctor", "text": text}))

    def turn_finished(self, index: int, *, answer: str, usage: dict[str, int]) -> None:
        self.buffer.finish_turn(
            index,
            dict(
                answer=storable_text(answer, max_bytes=self._max_field_bytes),
                input_tokens=_bigint(usage.get("input_tokens", 0)),
                output_tokens=_bigint(usage.get("output_tokens", 0)),
                finished_at=timezone.now(),
            ),
        )

    def check(self, index: int, result: CheckResult) -> None:
        self.buffer.add_row(
            Check(
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
        )

    def artifact(self, relative_path: str, text: str) -> None:
        if self.lost.is_set():
            return  # the folder is the new run's now
        artifact_paths.write_text(self.folder, relative_path, text)
        if is_mock_log(relative_path):  # the dashboard reads a mock's calls from rows
            self.buffer.add_mock_log(text)

    def mock_call(self, record: dict[str, Any]) -> None:
        """A call to one of the trial's mocks, as it happens (runner.mocks): a row with the
        next flush, so an open trial page shows it live and a reload finds it."""
        self.buffer.add_row(mock_call_row(self.trial_id, record))

    def consultation(self, record) -> None:
        """A responder, judge or simulated-user call: a row for the dashboard, and its prompt
        and verdict as files (responder/turn-<n>/, judges/check-<i>/) for audit."""
        self.buffer.add_row(
            Consultation(
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
                usage=record.usage,
            )
        )
        # Numbered from 1, as the dashboard shows turns and checks.
        folder = artifact_paths.consultation_folder(
            record.kind, turn_index=record.turn_index, check_index=record.check_index
        )
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
        self.buffer.stop_flushing()
        if self.buffer.events_dropped:
            self.log(
                f"{self.buffer.events_dropped} more events were dropped: a trial keeps "
                f"at most {self._max_events} (PROCTOR_MAX_TRIAL_EVENTS)."
            )
        usage = {
            k: _bigint(v) if isinstance(v, int) else v for k, v in (outcome.usage or {}).items()
        }
        with self._raw_lock:
            if not self.lost.is_set() and self._raw_dropped:
                self._raw_file.write(
                    f"{truncation_mark(self._raw_dropped)} not kept in output.log, capped at "
                    f"{self._max_raw_bytes} bytes\n".encode()
                )
            self._raw_file.close()

        def final_row() -> bool:
            # Fenced by the lease: no row means the trial was taken over.
            return (
                Trial.record_finish(
                    self.trial_id,
                    outcome.status,
                    owner=self.buffer.owner,
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
                    cost_usd=trial_cost_usd(self.variant, usage, self._reported_cost),
                    score=outcome.score,
                    threshold=outcome.threshold,
                    duration_ms=outcome.duration_ms,
                    artifacts_dir=str(self.folder),
                )
                is not None
            )

        if self.buffer.close(final_row):
            self._announce(outcome.status)

    # --- the rest --------------------------------------------------------------------------

    def flush(self) -> None:
        """Write what waits now, as the flusher does once it waited FLUSH_AFTER_S."""
        self.buffer.flush()

    def lease_lost(self) -> None:
        """Called by the heartbeat when it found the lease gone (a quiet agent flushes nothing)."""
        self.buffer.lease_lost()

    def _announce(self, status: str) -> None:
        publishing.trial_changed(
            trial_id=self.trial_id,
            run_id=self.run_id,
            batch_id=self.batch_id,
            status=status,
            wait=False,
        )


def _bigint(value: object) -> int:
    """A token count as a bigint column holds it: sums of huge counts are clamped."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return min(max(value, 0), MAX_INT64)


def reset_for_retry(trial: Trial) -> None:
    """Forget a trial's partial record and its artifacts so it can run again from the start."""
    trial.reset()
    shutil.rmtree(artifact_paths.trial_dir(trial.run.batch_id, trial.pk), ignore_errors=True)
