"""The production recorder: persists what a trial reports and publishes it live.

Everything a trial writes goes through one buffer: events, turns (started, then finished) and
checks are kept in memory and written in bulk, in one transaction per flush. A flush happens
when the trial ends (in the same transaction as the trial's final row: a no-op trial is one
transaction), and while the trial runs whenever something waited FLUSH_AFTER_S: one flusher
thread per process (``_Flusher``) wakes every FLUSH_TICK_S and flushes the recorders that are
due, so an event is stored and published within about FLUSH_AFTER_S + FLUSH_TICK_S of being
printed, even when nothing follows it. A stream faster than the flusher blocks its reader once
MAX_BUFFERED_EVENTS wait (memory stays bounded; the agent is slowed, never dropped).

**Fenced by the lease.** Every flush first renews the trial's lease with ``UPDATE ... WHERE
lease_owner = <this process>`` in its transaction; no row means another process took the trial
over (the reaper re-queued it after a stall, a redelivered message claimed it): the recorder
drops what it holds, writes nothing more (no events, turns, checks, files), and calls
``on_lost`` (which kills the trial's processes), so the trial ends quietly in this process.

Live updates go out per flush (one ``trial.event`` with the last seq), through the publisher's
own thread (``publishing.send_later``), so a trial never waits for the channel layer.

Everything stored is made safe and capped here (issue 11): each event passes through
``proctor.protocol.storable_event`` (NUL, lone surrogates, 64-bit numbers, ``at`` in range,
each text field capped at PROCTOR_MAX_EVENT_FIELD_BYTES, default 64 KiB); ``output.log`` keeps
PROCTOR_MAX_OUTPUT_LOG_BYTES (default 100 MiB), then a truncation mark and, at the end, the
count of bytes not kept; a trial keeps PROCTOR_MAX_TRIAL_EVENTS agent events (default 100,000),
then one Log event saying how many were dropped (Proctor's own notes are always kept). Answers,
errors, prompts and check output lose NUL and lone surrogates and are capped like a field.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import threading
import time
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from evals_app import hot_sql
from evals_app.cost import trial_cost_usd
from evals_app.models import Check, Consultation, Event, MockCall, Trial, Turn
from proctor.protocol import MAX_INT64, AgentEvent, storable_event, storable_text, truncation_mark
from runner.core.json_text import compact_json
from runner.core.reporting import TrialOutcome
from runner.core.results import CheckResult
from runner.jobs import artifact_paths, publishing
from runner.jobs.mock_call_rows import (
    is_mock_log,
    mock_call_row,
    store_live_calls,
    store_mock_calls,
)

log = logging.getLogger(__name__)

# A buffered write waits at most this long for the flusher (issue 11: visible within 1 s).
FLUSH_AFTER_S = 0.5
FLUSH_TICK_S = 0.1
# Past this many unwritten events the reader waits for the flusher (bounded memory).
MAX_BUFFERED_EVENTS = 5_000
BULK_BATCH = 1_000
RAW_BUFFER_BYTES = 1024 * 1024


class DatabaseRecorder:
    def __init__(
        self,
        trial: Trial,
        *,
        owner: str | None = None,
        on_lost: Callable[[], None] | None = None,
        events_stored: int | None = None,
    ) -> None:
        """``events_stored``: how many events the trial has stored already, where the caller
        knows it (a claimed trial has none); counted in the database otherwise."""
        self.trial_id = trial.pk
        # The lease the run holds: every write is made only while it still does.
        self.owner = owner
        self.on_lost = on_lost
        self.lost = threading.Event()
        self.run_id = trial.run_id
        self.batch_id = trial.run.batch_id
        self.folder: Path = artifact_paths.trial_dir(self.batch_id, trial.pk)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._events_file = open(self.folder / "events.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        # A large buffer: each write that reaches the disk lets the flusher thread take the
        # GIL from the reader, so fewer, larger writes keep the reader reading.
        self._raw_file = open(  # noqa: SIM115
            self.folder / "output.log", "ab", buffering=RAW_BUFFER_BYTES
        )
        self._max_field_bytes: int = settings.PROCTOR_MAX_EVENT_FIELD_BYTES
        self._max_raw_bytes: int = settings.PROCTOR_MAX_OUTPUT_LOG_BYTES
        self._max_events: int = settings.PROCTOR_MAX_TRIAL_EVENTS
        self._lease_s: float = settings.PROCTOR_LEASE_S
        self._raw_bytes = self._raw_file.tell()
        self._raw_dropped = 0
        self._events_dropped = 0
        # What waits for the next flush: events as (turn, seq, event), turns not yet inserted,
        # updates of inserted turns, checks and consultations.
        self._events: list[tuple[int, int, AgentEvent]] = []
        self._new_turns: dict[int, Turn] = {}
        self._turn_updates: dict[int, dict[str, Any]] = {}
        self._rows: list[Check | Consultation | MockCall] = []
        self._waiting_since: float | None = None
        self._seq = _events_stored(trial.pk) if events_stored is None else events_stored
        self._lock = threading.Lock()  # stdout and stderr pumps report from two threads
        self._room = threading.Condition(self._lock)  # a reader waiting for the flusher
        # One flush at a time, so events are written and published in the order of their seq.
        self._flush_lock = threading.Lock()
        self._closed = False
        # Whether the flusher serves this recorder (between trial_started and trial_finished):
        # only then does a reader wait for room.
        self._flushed_live = False
        # What the harness said the trial cost (Usage cost_usd), None while it said nothing.
        self._reported_cost: float | None = None
        self.variant = trial.run.variant

    # --- the TrialRecorder interface ---------------------------------------------------------

    def trial_started(self) -> None:
        # The claim already made the row running, with its start time. The artifacts folder is
        # recorded by the trial's first fenced write (a flush's renewal, or its final row), so a
        # short trial costs no transaction of its own here.
        self._announce(Trial.Status.RUNNING)
        self._flushed_live = True
        _flusher.add(self)

    def turn_started(self, index: int, prompt: str, *, origin: dict[str, Any], mode: str) -> None:
        with self._lock:
            if self.lost.is_set():
                return
            self._new_turns[index] = Turn(
                trial_id=self.trial_id,
                index=index,
                prompt=storable_text(prompt),
                origin=origin,
                mode=mode,
                started_at=timezone.now(),
            )
            self._waiting()

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
                    with self._lock:
                        self._reported_cost = (self._reported_cost or 0.0) + float(cost)
        # The seq only grows: past the cap already, no event need be made storable.
        if self._seq < self._max_events:
            max_bytes = self._max_field_bytes
            events = [storable_event(event, max_field_bytes=max_bytes) for event in events]
        with self._lock:
            if self.lost.is_set():
                return
            room = max(self._max_events - self._seq, 0)
            if len(events) > room:
                self._events_dropped += len(events) - room  # see _note_dropped_events
                events = events[:room]
            self._append(turn_index, events)
            if len(self._events) >= MAX_BUFFERED_EVENTS and self._flushed_live:
                _flusher.wake()
                # Back-pressure: the reader waits for the flusher rather than holding more.
                self._room.wait_for(
                    lambda: len(self._events) < MAX_BUFFERED_EVENTS or self.lost.is_set(),
                    timeout=30,
                )

    def _note(self, event: AgentEvent) -> None:
        """Buffer one of Proctor's own notes: kept past the cap, never waiting for room."""
        event = storable_event(event, max_field_bytes=self._max_field_bytes)
        with self._lock:
            if not self.lost.is_set():
                self._append(0, [event])

    def _append(self, turn_index: int, events: list[AgentEvent]) -> None:
        """Under ``_lock``: give ``events`` their seqs and queue them for the flusher."""
        if not events:
            return
        seq = self._seq
        self._events.extend([(turn_index, seq + i, event) for i, event in enumerate(events)])
        self._seq = seq + len(events)
        self._waiting()

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
        with self._lock:
            if self._raw_file.closed or self.lost.is_set():
                return
            if data and self._raw_bytes + len(data) <= self._max_raw_bytes:
                self._raw_file.write(data)
                self._raw_bytes += len(data)
                return
        for line in lines:
            self.raw_line(stream, line)

    def log(self, text: str) -> None:
        # Proctor's own notes are kept past the event cap: they say why a trial ended.
        self._note(AgentEvent("Log", {"stream": "proctor", "text": text}))

    def turn_finished(self, index: int, *, answer: str, usage: dict[str, int]) -> None:
        fields = dict(
            answer=storable_text(answer, max_bytes=self._max_field_bytes),
            input_tokens=_bigint(usage.get("input_tokens", 0)),
            output_tokens=_bigint(usage.get("output_tokens", 0)),
            finished_at=timezone.now(),
        )
        with self._lock:
            if self.lost.is_set():
                return
            turn = self._new_turns.get(index)
            if turn is not None:  # not written yet: written finished
                for name, value in fields.items():
                    setattr(turn, name, value)
            else:
                self._turn_updates.setdefault(index, {}).update(fields)
            self._waiting()

    def check(self, index: int, result: CheckResult) -> None:
        row = Check(
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
        with self._lock:
            if self.lost.is_set():
                return
            self._rows.append(row)
            self._waiting()

    def artifact(self, relative_path: str, text: str) -> None:
        if self.lost.is_set():
            return  # the folder is the new run's now
        artifact_paths.write_text(self.folder, relative_path, text)
        if is_mock_log(relative_path):  # the dashboard reads a mock's calls from rows
            store_mock_calls(self.trial_id, text)

    def mock_call(self, record: dict[str, Any]) -> None:
        """A call to one of the trial's mocks, as it happens (runner.mocks): a row with the
        next flush, so an open trial page shows it live and a reload finds it."""
        row = mock_call_row(self.trial_id, record)
        with self._lock:
            if self.lost.is_set() or self._closed:
                return
            self._rows.append(row)
            self._waiting()

    def consultation(self, record) -> None:
        """A responder, judge or simulated-user call: a row for the dashboard, and its prompt
        and verdict as files (responder/turn-<n>/, judges/check-<i>/) for audit."""
        row = Consultation(
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
        with self._lock:
            if self.lost.is_set():
                return
            self._rows.append(row)
            self._waiting()
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
        _flusher.discard(self)
        self._flushed_live = False
        self._note_dropped_events()
        usage = {
            k: _bigint(v) if isinstance(v, int) else v for k, v in (outcome.usage or {}).items()
        }
        recorded = False
        with self._flush_lock:
            with self._lock:
                if not self.lost.is_set() and self._raw_dropped:
                    self._raw_file.write(
                        f"{truncation_mark(self._raw_dropped)} not kept in output.log, capped at "
                        f"{self._max_raw_bytes} bytes\n".encode()
                    )
                self._raw_file.close()
            # The trial's final row and the last of the buffer: one transaction. The final
            # UPDATE is fenced by the lease like a flush's renewal, so it comes first and stands
            # for it: no row means the trial was taken over, and nothing else is written.
            with transaction.atomic():
                if not self.lost.is_set():
                    written = Trial.record_finish(
                        self.trial_id,
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
                        cost_usd=trial_cost_usd(self.variant, usage, self._reported_cost),
                        score=outcome.score,
                        threshold=outcome.threshold,
                        duration_ms=outcome.duration_ms,
                        artifacts_dir=str(self.folder),
                    )
                    recorded = written is not None
                    if recorded:
                        self._write_pending(renew=False)
                    elif self.owner is not None:
                        self._lose()
            with self._lock:
                self._closed = True
                self._events_file.close()
        self._published()
        if recorded:
            self._announce(outcome.status)

    # --- internals -----------------------------------------------------------------------------

    def _waiting(self) -> None:
        """Something was buffered (under ``_lock``): start its wait for the flusher."""
        if self._waiting_since is None:
            self._waiting_since = time.monotonic()

    def due(self, now: float) -> bool:
        since = self._waiting_since
        return since is not None and (
            now - since >= FLUSH_AFTER_S or len(self._events) >= MAX_BUFFERED_EVENTS
        )

    def _note_dropped_events(self) -> None:
        if self._events_dropped:
            self._note(
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
        """Write what waits, in one transaction fenced by the lease, and announce it."""
        with self._flush_lock:
            if self._closed:
                return
            with transaction.atomic():
                self._write_pending()
            with self._lock:  # output.log on disk keeps up with the events
                if not self._raw_file.closed:
                    self._raw_file.flush()
        self._published()

    def _write_pending(self, *, renew: bool = True) -> bool:
        """Inside the caller's transaction (and ``_flush_lock``): renew the lease (unless the
        caller's own fenced write did), then write the buffer. False when the lease is lost
        (nothing is written, and the loss is acted on)."""
        with self._lock:
            events, self._events = self._events, []
            new_turns, self._new_turns = list(self._new_turns.values()), {}
            updates, self._turn_updates = self._turn_updates, {}
            rows, self._rows = self._rows, []
            self._waiting_since = None
            self._room.notify_all()
        if self.lost.is_set():
            return False
        try:
            if renew and self.owner is not None and not self._renew_lease():
                self._lose()
                return False
            self._write(events, new_turns, updates, rows)
        except BaseException:
            # Rolled back: keep what waited for the next flush, in its order.
            with self._lock:
                self._events[:0] = events
                self._new_turns = {**{t.index: t for t in new_turns}, **self._new_turns}
                for index, fields in updates.items():
                    self._turn_updates[index] = {**fields, **self._turn_updates.get(index, {})}
                self._rows[:0] = rows
                self._waiting()
            raise
        return True

    def _write(self, events, new_turns, updates, rows) -> None:
        if new_turns:
            hot_sql.insert_rows(Turn, new_turns)
        for index, fields in updates.items():
            Turn.objects.filter(trial_id=self.trial_id, index=index).update(**fields)
        if events:
            # Each event's data is encoded once: the row's JSON and its events.jsonl line.
            texts = [compact_json(event.data) for _, _, event in events]
            _insert_events(self.trial_id, events, texts)
            self._events_file.writelines(
                _jsonl_line(turn_index, event, text)
                for (turn_index, _, event), text in zip(events, texts, strict=True)
            )
            self._events_file.flush()
            self._last_seq = events[-1][1]
        checks = [row for row in rows if isinstance(row, Check)]
        if checks:
            hot_sql.insert_rows(Check, checks)
        consultations = [row for row in rows if isinstance(row, Consultation)]
        if consultations:
            Consultation.objects.bulk_create(consultations)
        calls = [row for row in rows if isinstance(row, MockCall)]
        if calls:
            store_live_calls(calls)
            self._mock_calls_written += len(calls)

    def _renew_lease(self) -> bool:
        """The flush's fence: the lease renewed (and on the trial's first write, its folder
        named) only while this process holds it."""
        if self.owner is None:  # unfenced (a recorder of no lease)
            return True
        folder = None if self._folder_recorded else str(self.folder)
        renewed = bool(
            Trial.renew_leases(
                self.owner, [self.trial_id], lease_s=self._lease_s, artifacts_dir=folder
            )
        )
        self._folder_recorded = self._folder_recorded or renewed
        return renewed

    def _lose(self) -> None:
        """Another process owns the trial now: stop writing and stop the trial's processes."""
        if self.lost.is_set():
            return
        self.lost.set()
        with self._lock:
            self._events, self._new_turns, self._turn_updates, self._rows = [], {}, {}, []
            self._room.notify_all()
        log.warning(
            "trial %s is no longer this process's to record (its lease moved on: taken over "
            "by another process, or the trial was ended); its agent is ended and nothing more "
            "of it is written",
            self.trial_id,
        )
        if self.on_lost is not None:
            self.on_lost()

    def lease_lost(self) -> None:
        """Called by the heartbeat when it found the lease gone (a quiet agent flushes nothing)."""
        self._lose()

    # Whether the trial's row names its artifacts folder yet (see trial_started).
    _folder_recorded = False
    _last_seq: int | None = None
    _published_seq: int | None = None
    # Mock calls written, and as many as were announced (they are shown with the events).
    _mock_calls_written = 0
    _mock_calls_published = 0

    def _published(self) -> None:
        seq = self._last_seq
        calls = self._mock_calls_written
        if self.lost.is_set():
            return
        if (seq is not None and seq != self._published_seq) or calls != self._mock_calls_published:
            self._published_seq, self._mock_calls_published = seq, calls
            seq = -1 if seq is None else seq
            publishing.event_recorded(
                trial_id=self.trial_id, batch_id=self.batch_id, seq=seq, wait=False
            )

    def _announce(self, status: str) -> None:
        publishing.trial_changed(
            trial_id=self.trial_id,
            run_id=self.run_id,
            batch_id=self.batch_id,
            status=status,
            wait=False,
        )


_EVENT_COLUMNS = "(trial_id, turn_index, seq, kind, at, data)"


def _events_stored(trial_id: int) -> int:
    """How many events the trial has stored (the next seq): a plain query, as the ORM's
    count() cost more to compile than to run."""
    table = connection.ops.quote_name(Event._meta.db_table)
    [(count,)] = hot_sql.execute(
        f"SELECT COUNT(*) FROM {table} WHERE trial_id = %s", [trial_id], fetch=True
    )
    return int(count)


def _insert_events(
    trial_id: int, events: list[tuple[int, int, AgentEvent]], texts: list[str]
) -> None:
    """Write the events' rows, ``texts`` being each one's data as JSON: with COPY on
    PostgreSQL, else one multi-row INSERT per BULK_BATCH rows. Values are adapted as the ORM's
    fields adapt them, but with no model object or compiled query per row, which were most of
    what ingest cost.

    Not ``executemany``: SQLite's driver steps the statement once per row and lets the
    interpreter lock go around each step, so every row handed the lock to the reader thread
    and waited to get it back (a third of a 100,000-event trial's time). One statement of many
    rows is one step."""
    table = connection.ops.quote_name(Event._meta.db_table)
    if connection.vendor == "postgresql":
        copy_sql = f"COPY {table} {_EVENT_COLUMNS} FROM STDIN"
        with connection.cursor() as cursor, cursor.cursor.copy(copy_sql) as copy:
            copy.write(_copy_text(trial_id, events, texts))
        return
    adapt_at = connection.ops.adapt_datetimefield_value
    # Many events share a millisecond: its datetime is made once.
    last_ms: int | None = None
    last_at: Any = None
    values: list[Any] = []
    for (turn_index, seq, event), text in zip(events, texts, strict=True):
        if event.at_ms != last_ms:
            last_ms = event.at_ms
            last_at = adapt_at(datetime.fromtimestamp(last_ms / 1000, tz=UTC))
        values += (trial_id, turn_index, seq, event.kind, last_at, text)
    per_statement = _rows_per_insert() * _EVENT_FIELDS
    for start in range(0, len(values), per_statement):
        chunk = values[start : start + per_statement]
        hot_sql.execute(_multi_row_insert(table, len(chunk) // _EVENT_FIELDS), chunk)


_EVENT_FIELDS = 6


def _rows_per_insert() -> int:
    """BULK_BATCH, or fewer where the database takes fewer values per statement (SQLite
    before 3.32 took 999)."""
    return max(1, min(BULK_BATCH, hot_sql.max_parameters() // _EVENT_FIELDS))


@functools.lru_cache(maxsize=16)
def _multi_row_insert(table: str, rows: int) -> str:
    one_row = "(" + ", ".join(["%s"] * _EVENT_FIELDS) + ")"
    return f"INSERT INTO {table} {_EVENT_COLUMNS} VALUES " + ", ".join([one_row] * rows)


# What COPY's text format escapes in a value (a backslash starts an escape; a tab, a newline
# and a carriage return end a column or a row).
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_field(text: str) -> str:
    if "\\" in text or "\t" in text or "\n" in text or "\r" in text:
        return text.translate(_COPY_ESCAPES)
    return text


def _copy_text(trial_id: int, events: list[tuple[int, int, AgentEvent]], texts: list[str]) -> str:
    """The events' rows in COPY's text format, made in one piece: psycopg's ``write_row``,
    called per row, was most of what a flush cost on PostgreSQL."""
    last_ms: int | None = None
    at = ""
    kinds: dict[str, str] = {}
    lines = []
    for (turn_index, seq, event), text in zip(events, texts, strict=True):
        if event.at_ms != last_ms:
            last_ms = event.at_ms
            at = datetime.fromtimestamp(last_ms / 1000, tz=UTC).isoformat()
        kind = kinds.get(event.kind)
        if kind is None:
            kind = kinds[event.kind] = _copy_field(event.kind)
        # JSON text holds no raw tab, newline or carriage return (inside a string it writes
        # them escaped; compact JSON has nothing between its values): of COPY's four
        # characters only the backslash can be in it, and doubling it is one pass in C.
        data = text.replace("\\", "\\\\")
        lines.append(f"{trial_id}\t{turn_index}\t{seq}\t{kind}\t{at}\t{data}\n")
    return "".join(lines)


_KIND_JSON: dict[str, str] = {}


def _jsonl_line(turn_index: int, event: AgentEvent, text: str) -> str:
    """The events.jsonl line, as ``json.dumps({"turn": …, **event.to_json()})`` writes it,
    made from the data's JSON ``text`` already encoded for the row."""
    data = event.data
    if "turn" in data or "kind" in data or "at" in data:  # they would replace the header's
        return json.dumps({"turn": turn_index, **event.to_json()}, ensure_ascii=False) + "\n"
    kind = _KIND_JSON.get(event.kind)
    if kind is None:
        kind = json.dumps(event.kind, ensure_ascii=False)
        if len(_KIND_JSON) < 100:
            _KIND_JSON[event.kind] = kind
    rest = "}" if text == "{}" else ", " + text[1:]
    return f'{{"turn": {turn_index}, "kind": {kind}, "at": {event.at_ms}{rest}\n'


class _Flusher:
    """The process's one flusher thread: flushes every running recorder whose buffer waited
    FLUSH_AFTER_S. It ends (closing its database connection) once no trial runs, and starts
    again with the next."""

    IDLE_S = 2.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._recorders: weakref.WeakSet[DatabaseRecorder] = weakref.WeakSet()
        self._thread: threading.Thread | None = None

    def add(self, recorder: DatabaseRecorder) -> None:
        with self._lock:
            self._recorders.add(recorder)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="proctor-flusher", daemon=True
                )
                self._thread.start()

    def discard(self, recorder: DatabaseRecorder) -> None:
        with self._lock:
            self._recorders.discard(recorder)

    def wake(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        idle_since: float | None = None
        try:
            while True:
                self._wake.wait(FLUSH_TICK_S)
                self._wake.clear()
                now = time.monotonic()
                with self._lock:
                    recorders = list(self._recorders)
                    if recorders:
                        idle_since = None
                    elif idle_since is None:
                        idle_since = now
                    elif now - idle_since > self.IDLE_S:
                        self._thread = None
                        return
                for recorder in recorders:
                    if recorder.due(now):
                        try:
                            recorder.flush()
                        except Exception:  # a locked database: the next tick tries again
                            log.warning(
                                "could not write trial %s yet", recorder.trial_id, exc_info=True
                            )
                            with contextlib.suppress(Exception):
                                connection.close()
        finally:
            with contextlib.suppress(Exception):
                connection.close()


_flusher = _Flusher()


def _forget_in_child() -> None:
    """A forked child flushes its own recorders on a flusher thread of its own."""
    global _flusher
    _flusher = _Flusher()


os.register_at_fork(after_in_child=_forget_in_child)


def _bigint(value: object) -> int:
    """A token count as a bigint column holds it: sums of huge counts are clamped."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return min(max(value, 0), MAX_INT64)


def reset_for_retry(trial: Trial) -> None:
    """Forget a trial's partial record and its artifacts so it can run again from the start."""
    trial.reset()
    shutil.rmtree(artifact_paths.trial_dir(trial.run.batch_id, trial.pk), ignore_errors=True)
