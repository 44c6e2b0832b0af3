"""A trial's event rows: how many it has stored, and writing a flush's worth of them.

Values are adapted as the ORM's fields adapt them, but with no model object or compiled query
per row, which were most of what ingest cost. On PostgreSQL the rows go in with one ``COPY``,
written as one piece of COPY text made here; elsewhere as ``hot_sql.insert_many``'s statements
of many rows. Neither checks the lease: the caller writes them in a transaction its fenced
statement began (``runner.jobs.fenced_buffer``), once per flush rather than once per row.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db import connection

from evals_app import hot_sql
from evals_app.models import Event
from proctor.agent_events import AgentEvent

# Rows per INSERT, at most: the statement's text and its parameters stay small enough to make
# in one piece, and SQLite before 3.32 took 999 parameters anyway (insert_many caps by those).
ROWS_PER_INSERT = 1_000
_COLUMNS = "(trial_id, turn_index, seq, kind, at, data)"
_WIDTH = 6


def events_stored(trial_id: int) -> int:
    """How many events the trial has stored (the next seq): a plain query, as the ORM's
    count() cost more to compile than to run."""
    table = connection.ops.quote_name(Event._meta.db_table)
    [(count,)] = hot_sql.execute(
        f"SELECT COUNT(*) FROM {table} WHERE trial_id = %s", [trial_id], fetch=True
    )
    return int(count)


def insert_events(
    trial_id: int, events: list[tuple[int, int, AgentEvent]], texts: list[str]
) -> None:
    """Write the rows of ``events`` (each ``(turn index, seq, event)``), ``texts`` being each
    one's data as JSON text."""
    table = connection.ops.quote_name(Event._meta.db_table)
    if connection.vendor == "postgresql":
        copy_sql = f"COPY {table} {_COLUMNS} FROM STDIN"
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
    hot_sql.insert_many(
        f"INSERT INTO {table} {_COLUMNS}", _WIDTH, values, most_rows=ROWS_PER_INSERT
    )


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
