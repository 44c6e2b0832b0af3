"""A trial's mock call log (``mocks/<name>.jsonl``, already redacted) as MockCall rows."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from evals_app.models import MockCall
from proctor.protocol import storable_text

MOCK_LOG = "mocks/"
# What one row keeps of a long path (a cli's arguments).
MAX_PATH_CHARS = 500


def is_mock_log(relative_path: str) -> bool:
    return relative_path.startswith(MOCK_LOG) and relative_path.endswith(".jsonl")


def store_mock_calls(trial_id: int, text: str) -> int:
    """Replace the rows of the mock this log belongs to with its calls; how many were stored."""
    # PostgreSQL keeps no NUL in JSON: shown as ␀, as everywhere else stored.
    records = [
        json.loads(line.replace("\\u0000", "\u2400")) for line in text.splitlines() if line.strip()
    ]
    rows = [
        MockCall(
            trial_id=trial_id,
            mock=str(record.get("mock", ""))[:40],
            kind=str(record.get("kind", ""))[:3],
            seq=int(record.get("seq") or index),
            at=datetime.fromtimestamp(float(record.get("at") or 0), tz=UTC),
            method=storable_text(str(record.get("method", "")))[:40],
            path=storable_text(str(record.get("path", "")))[:MAX_PATH_CHARS],
            status=record.get("status"),
            duration_ms=max(0, int(record.get("duration_ms") or 0)),
            record=record,
        )
        for index, record in enumerate(records, start=1)
    ]
    mocks = {row.mock for row in rows}
    MockCall.objects.filter(trial_id=trial_id, mock__in=mocks).delete()
    MockCall.objects.bulk_create(rows)
    return len(rows)
