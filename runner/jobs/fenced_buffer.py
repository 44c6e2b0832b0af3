"""A trial's writes waiting for the database, and writing them only while the trial is still
this process's: the buffer, its flusher thread and the lease fence.

Events, turns (started, then finished), checks, consultations and mock calls are kept in memory
and written in bulk, in one transaction per flush. A flush happens when the trial ends (in the
same transaction as the trial's final row: a no-op trial is one transaction), and while the
trial runs whenever something waited FLUSH_AFTER_S: one flusher thread per process wakes every
FLUSH_TICK_S and flushes the buffers that are due, so an event is stored and published within
about FLUSH_AFTER_S + FLUSH_TICK_S of being printed, even when nothing follows it. A stream
faster than the flusher blocks its reader once MAX_BUFFERED_EVENTS wait (memory stays bounded;
the agent is slowed, never dropped).

**Fenced by the lease.** Every write of the trial's events, turns, checks, consultations and
mock calls is made in a transaction whose first statement is conditional on the lease
(``Trial.lease_fence``): a flush's renewal (``Trial.renew_leases``), or at the end the trial's
final row. That statement takes the trial row's lock, so no other claim, reaper or hand-back
can come between it and the rows written after it: one fence per flush, not per row. When it
finds the lease gone (the reaper re-queued the trial after a stall, another claim took it
over, it was ended), the buffer drops what it holds, writes nothing more, says in one line
logged what became of the trial, and calls ``on_lost`` (which ends the trial's processes). The
new holder's record is never touched.

Live updates go out per flush (one ``trial.event`` with the last seq), through the publisher's
own thread (``publishing.send_later``), so a trial never waits for the channel layer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import DatabaseError, connection, transaction

from evals_app import hot_sql
from evals_app.models import Check, Consultation, MockCall, Trial, Turn
from proctor.agent_events import AgentEvent
from runner.core.json_text import compact_json, events_jsonl_line
from runner.jobs import event_rows, publishing
from runner.jobs.mock_call_rows import store_live_calls, store_mock_calls

log = logging.getLogger(__name__)

# A buffered write waits at most this long for the flusher (issue 11: visible within 1 s).
FLUSH_AFTER_S = 0.5
FLUSH_TICK_S = 0.1
# Past this many unwritten events the reader waits for the flusher (bounded memory).
MAX_BUFFERED_EVENTS = 5_000


class FencedBuffer:
    """One trial's writes not made yet (``add_*``), and the flushes that make them under the
    trial's lease, held by ``owner``. ``events.jsonl`` in ``folder`` gets each event's line as
    its row is written."""

    def __init__(
        self,
        trial_id: int,
        *,
        owner: str,
        batch_id: int,
        folder: Path,
        lease_s: float,
        events_stored: int,
        on_lost: Callable[[], None] | None = None,
        after_flush: Callable[[], None] | None = None,
    ) -> None:
        """``events_stored``: how many events the trial has stored already (the next seq).
        ``after_flush``: what to bring up to date with each flush (the trial's output.log)."""
        self.trial_id = trial_id
        self.owner = owner
        self.batch_id = batch_id
        self.folder = folder
        self.on_lost = on_lost
        self._after_flush = after_flush
        self._lease_s = lease_s
        self.lost = threading.Event()
        self._events_file = open(folder / "events.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self.next_seq = events_stored
        self.events_dropped = 0
        # Waiting for the next flush: events as (turn, seq, event), turns not yet inserted,
        # updates of inserted turns, checks, consultations and mock calls, whole mock logs.
        self._events: list[tuple[int, int, AgentEvent]] = []
        self._new_turns: dict[int, Turn] = {}
        self._turn_updates: dict[int, dict[str, Any]] = {}
        self._rows: list[Check | Consultation | MockCall] = []
        self._mock_logs: list[str] = []
        self._waiting_since: float | None = None
        self._lock = threading.Lock()  # stdout and stderr pumps add from two threads
        self._room = threading.Condition(self._lock)  # a reader waiting for the flusher
        # One flush at a time, so events are written and published in the order of their seq.
        self._flush_lock = threading.Lock()
        self.closed = False
        # Whether the flusher serves this buffer (see start_flushing): only then does a reader
        # wait for room.
        self._live = False
        # Whether the trial's row names its artifacts folder yet (its first fenced write does).
        self._folder_recorded = False
        self._last_seq: int | None = None
        self._published_seq: int | None = None
        # Mock calls written, and as many as were announced (they are shown with the events).
        self._mock_calls_written = 0
        self._mock_calls_published = 0

    # --- what waits ------------------------------------------------------------------------

    def add_events(
        self, turn_index: int, events: list[AgentEvent], *, keep_at_most: int | None = None
    ) -> None:
        """Queue ``events`` with the next seqs; those past ``keep_at_most`` stored events are
        counted in ``events_dropped`` instead. A full buffer makes the caller wait for the
        flusher."""
        with self._lock:
            if self.lost.is_set():
                return
            if keep_at_most is not None:
                room = max(keep_at_most - self.next_seq, 0)
                if len(events) > room:
                    self.events_dropped += len(events) - room
                    events = events[:room]
            if events:
                seq = self.next_seq
                self._events.extend(
                    [(turn_index, seq + i, event) for i, event in enumerate(events)]
                )
                self.next_seq = seq + len(events)
                self._waiting()
            if len(self._events) >= MAX_BUFFERED_EVENTS and self._live:
                _flusher.wake()
                # Back-pressure: the reader waits for the flusher rather than holding more.
                self._room.wait_for(
                    lambda: len(self._events) < MAX_BUFFERED_EVENTS or self.lost.is_set(),
                    timeout=30,
                )

    def add_turn(self, turn: Turn) -> None:
        with self._lock:
            if not self.lost.is_set():
                self._new_turns[turn.index] = turn
                self._waiting()

    def finish_turn(self, index: int, fields: dict[str, Any]) -> None:
        """Set ``fields`` on the turn ``index``: on its row if written, else before it is."""
        with self._lock:
            if self.lost.is_set():
                return
            turn = self._new_turns.get(index)
            if turn is not None:
                for name, value in fields.items():
                    setattr(turn, name, value)
            else:
                self._turn_updates.setdefault(index, {}).update(fields)
            self._waiting()

    def add_row(self, row: Check | Consultation | MockCall) -> None:
        with self._lock:
            if not self.lost.is_set() and not self.closed:
                self._rows.append(row)
                self._waiting()

    def add_mock_log(self, text: str) -> None:
        """A mock's whole call log (``mocks/<name>.jsonl``), to become its rows."""
        with self._lock:
            if not self.lost.is_set() and not self.closed:
                self._mock_logs.append(text)
                self._waiting()

    def _waiting(self) -> None:
        """Something was queued (under ``_lock``): start its wait for the flusher."""
        if self._waiting_since is None:
            self._waiting_since = time.monotonic()

    def due(self, now: float) -> bool:
        since = self._waiting_since
        return since is not None and (
            now - since >= FLUSH_AFTER_S or len(self._events) >= MAX_BUFFERED_EVENTS
        )

    # --- writing ---------------------------------------------------------------------------

    def start_flushing(self) -> None:
        """Have the process's flusher write what waits FLUSH_AFTER_S, until ``stop_flushing``."""
        self._live = True
        _flusher.add(self)

    def stop_flushing(self) -> None:
        _flusher.discard(self)
        self._live = False

    def flush(self) -> None:
        """Write what waits, in one transaction fenced by the lease, and announce it."""
        with self._flush_lock:
            if self.closed:
                return
            with transaction.atomic():
                self._write_pending(renew=True)
            if self._after_flush is not None:
                self._after_flush()
        self._published()

    def close(self, final_row: Callable[[], bool]) -> bool:
        """The last write: ``final_row`` (the trial's final UPDATE, fenced by the lease: False
        when it changed no row) and what still waits, in one transaction; then nothing more is
        written. Whether it was written. The final row's fence stands for a flush's renewal, so
        a trial costs one fenced statement at its end."""
        written = False
        with self._flush_lock:
            with transaction.atomic():
                if not self.lost.is_set():
                    if final_row():
                        written = self._write_pending(renew=False)
                    else:
                        self._lose()
            with self._lock:
                self.closed = True
                self._events_file.close()
        self._published()
        return written

    def _write_pending(self, *, renew: bool) -> bool:
        """Inside the caller's transaction (and ``_flush_lock``): renew the lease (unless the
        caller's own fenced write just did), then write what waits. False when the lease is
        lost (nothing is written, and the loss is acted on)."""
        with self._lock:
            events, self._events = self._events, []
            new_turns, self._new_turns = list(self._new_turns.values()), {}
            updates, self._turn_updates = self._turn_updates, {}
            rows, self._rows = self._rows, []
            mock_logs, self._mock_logs = self._mock_logs, []
            self._waiting_since = None
            self._room.notify_all()
        if self.lost.is_set():
            return False
        try:
            if renew and not self._renew_lease():
                self._lose(held=(events, new_turns, updates, rows))
                return False
            self._write(events, new_turns, updates, rows, mock_logs)
        except BaseException:
            # Rolled back: keep what waited for the next flush, in its order.
            with self._lock:
                self._events[:0] = events
                self._new_turns = {**{t.index: t for t in new_turns}, **self._new_turns}
                for index, fields in updates.items():
                    self._turn_updates[index] = {**fields, **self._turn_updates.get(index, {})}
                self._rows[:0] = rows
                self._mock_logs[:0] = mock_logs
                self._waiting()
            raise
        return True

    def _renew_lease(self) -> bool:
        """The flush's fence: the lease renewed (and on the trial's first write, its folder
        named) only while this process holds it."""
        folder = None if self._folder_recorded else str(self.folder)
        renewed = bool(
            Trial.renew_leases(
                self.owner, [self.trial_id], lease_s=self._lease_s, artifacts_dir=folder
            )
        )
        self._folder_recorded = self._folder_recorded or renewed
        return renewed

    def _write(self, events, new_turns, updates, rows, mock_logs) -> None:
        if new_turns:
            hot_sql.insert_rows(Turn, new_turns)
        for index, fields in updates.items():
            Turn.objects.filter(trial_id=self.trial_id, index=index).update(**fields)
        if events:
            # Each event's data is encoded once: the row's JSON and its events.jsonl line.
            texts = [compact_json(event.data) for _, _, event in events]
            event_rows.insert_events(self.trial_id, events, texts)
            self._events_file.writelines(
                events_jsonl_line(turn_index, event, text)
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
        for text in mock_logs:  # after the live rows, which the whole log rewrites
            store_mock_calls(self.trial_id, text)

    # --- the lease lost --------------------------------------------------------------------

    def lease_lost(self) -> None:
        """Called by the heartbeat when it found the lease gone (a quiet agent flushes nothing)."""
        self._lose()

    def _lose(self, held: tuple | None = None) -> None:
        """Another process owns the trial now, or nobody does: stop writing, say so once, and
        stop the trial's processes. ``held``: what the failed flush had taken from the buffer."""
        if self.lost.is_set():
            return
        self.lost.set()
        taken_events, taken_turns, taken_updates, taken_rows = held or ([], [], {}, [])
        with self._lock:
            events = len(taken_events) + len(self._events)
            turns = len(
                {turn.index for turn in taken_turns}
                | set(taken_updates)
                | set(self._new_turns)
                | set(self._turn_updates)
            )
            checks = sum(isinstance(row, Check) for row in [*taken_rows, *self._rows])
            self._events, self._new_turns, self._turn_updates = [], {}, {}
            self._rows, self._mock_logs = [], []
            self._room.notify_all()
        log.warning(
            "trial %s %s: this process lost its lease, so it stopped writing the trial (%s, %s "
            "and %s it held are not written) and ends its agent",
            self.trial_id,
            _what_became_of(self.trial_id),
            _count(events, "event"),
            _count(turns, "turn"),
            _count(checks, "check"),
        )
        if self.on_lost is not None:
            self.on_lost()

    # --- announcing ------------------------------------------------------------------------

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


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _what_became_of(trial_id: int) -> str:
    """What the trial's row says now, of a trial whose lease its process lost: a clause."""
    try:
        row = Trial.objects.filter(pk=trial_id).values_list("status", "lease_owner").first()
    except DatabaseError:
        return "is no longer this process's (the database could not say whose it is)"
    if row is None:
        return "was deleted"
    status, holder = row
    if status == Trial.Status.RUNNING and holder:
        return f"is already being run elsewhere (by {holder})"
    if status == Trial.Status.QUEUED:
        return "was queued again (its lease had lapsed)"
    return f"was ended meanwhile ({status})"


class _Flusher:
    """The process's one flusher thread: flushes every running trial's buffer that waited
    FLUSH_AFTER_S. It ends (closing its database connection) once no trial runs, and starts
    again with the next."""

    IDLE_S = 2.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._buffers: weakref.WeakSet[FencedBuffer] = weakref.WeakSet()
        self._thread: threading.Thread | None = None

    def add(self, buffer: FencedBuffer) -> None:
        with self._lock:
            self._buffers.add(buffer)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="proctor-flusher", daemon=True
                )
                self._thread.start()

    def discard(self, buffer: FencedBuffer) -> None:
        with self._lock:
            self._buffers.discard(buffer)

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
                    buffers = list(self._buffers)
                    if buffers:
                        idle_since = None
                    elif idle_since is None:
                        idle_since = now
                    elif now - idle_since > self.IDLE_S:
                        self._thread = None
                        return
                for buffer in buffers:
                    if buffer.due(now):
                        try:
                            buffer.flush()
                        except Exception:  # a locked database: the next tick tries again
                            log.warning(
                                "could not write trial %s yet", buffer.trial_id, exc_info=True
                            )
                            with contextlib.suppress(Exception):
                                connection.close()
        finally:
            with contextlib.suppress(Exception):
                connection.close()


_flusher = _Flusher()


def _forget_in_child() -> None:
    """A forked child flushes its own buffers on a flusher thread of its own."""
    global _flusher
    _flusher = _Flusher()


os.register_at_fork(after_in_child=_forget_in_child)
