"""A trial's mock calls as MockCall rows: one at a time while the trial runs (the recorder's
buffer), then the whole log (``mocks/<name>.jsonl``, already redacted) at its end."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from evals_app.models import MockCall
from proctor.agent_events import storable_text

MOCK_LOG = "mocks/"
# What one row keeps of a long path (a cli's arguments).
MAX_PATH_CHARS = 500
# The columns the whole log rewrites on a row stored while the trial ran.
UPDATED = ["kind", "at", "method", "path", "status", "duration_ms", "record"]


def is_mock_log(relative_path: str) -> bool:
    return relative_path.startswith(MOCK_LOG) and relative_path.endswith(".jsonl")


def _nul_free(value: Any) -> Any:
    """PostgreSQL keeps no NUL in JSON: shown as ␀, as everywhere else stored."""
    if isinstance(value, str):
        return value.replace("\x00", "\u2400")
    if isinstance(value, dict):
        return {k: _nul_free(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nul_free(v) for v in value]
    return value


def mock_call_row(trial_id: int, record: dict[str, Any], index: int = 1) -> MockCall:
    """One logged call (``runner.core.mock_calls.MockCall`` as JSON) as a row."""
    return MockCall(
        trial_id=trial_id,
        mock=str(record.get("mock", ""))[:40],
        kind=str(record.get("kind", ""))[:3],
        seq=int(record.get("seq") or index),
        at=datetime.fromtimestamp(float(record.get("at") or 0), tz=UTC),
        method=storable_text(str(record.get("method", "")))[:40],
        path=storable_text(str(record.get("path", "")))[:MAX_PATH_CHARS],
        status=record.get("status"),
        duration_ms=max(0, int(record.get("duration_ms") or 0)),
        record=_nul_free(record),
    )


def store_live_calls(rows: list[MockCall]) -> None:
    """Rows made while the trial runs; one the whole log already stored is left as it is."""
    MockCall.objects.bulk_create(rows, ignore_conflicts=True)


def store_mock_calls(trial_id: int, text: str) -> int:
    """Make the rows of the mock this log belongs to its calls; how many were stored. Rows
    stored while the trial ran keep their ids (an open trial page knows them by id)."""
    records = [
        json.loads(line.replace("\\u0000", "\u2400")) for line in text.splitlines() if line.strip()
    ]
    rows = [mock_call_row(trial_id, record, index) for index, record in enumerate(records, start=1)]
    for mock in {row.mock for row in rows}:
        kept = [row.seq for row in rows if row.mock == mock]
        MockCall.objects.filter(trial_id=trial_id, mock=mock).exclude(seq__in=kept).delete()
    MockCall.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["trial", "mock", "seq"],
        update_fields=UPDATED,
    )
    return len(rows)
