"""A trial's mock calls on its page: placed in the transcript between the events they happened
between (by time), and grouped by mock for the Mocks tab."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from dashboard.transcript_paging import TranscriptPage
from evals_app.models import MockCall, Trial


@dataclass(frozen=True)
class MockCalls:
    name: str
    kind: str
    calls: list[MockCall]


def trial_mock_calls(trial: Trial) -> list[MockCall]:
    """Every call of the trial's mocks, in the order they happened (one query), each with its
    request and answer as readable text (``body_text``, ``response_text``)."""
    calls = list(trial.mock_calls.order_by("at", "id"))
    for call in calls:
        record = call.record or {}
        call.body_text = pretty(record.get("body"))  # type: ignore[attr-defined]
        call.response_text = pretty(record.get("response"))  # type: ignore[attr-defined]
    return calls


def by_mock(trial: Trial, calls: list[MockCall]) -> list[MockCalls]:
    """The case's mocks (those that received no call too), each with its calls."""
    definition = trial.run.case_version.definition or {}
    groups: dict[str, MockCalls] = {
        m["name"]: MockCalls(m["name"], m["kind"], []) for m in definition.get("mocks") or []
    }
    for call in calls:
        groups.setdefault(call.mock, MockCalls(call.mock, call.kind, [])).calls.append(call)
    return list(groups.values())


def place_in_transcript(page: TranscriptPage, calls: list[MockCall]) -> list[MockCall]:
    """Give each entry of ``page`` the calls made between the entry before it and its own first
    event (``entry.mock_calls``); returns the calls after the page's last event when the page
    is the transcript's last, to show at its end. On a later page, calls before its first
    event were shown by the page before."""
    boundary = None
    if page.after >= 0:
        firsts = [entry.events[0].at for entry in page.entries if entry.events]
        boundary = firsts[0] if firsts else None
    for entry in page.entries:
        entry.mock_calls = []  # type: ignore[attr-defined]  # read by the template
        if not entry.events:
            continue
        start = entry.events[0].at
        entry.mock_calls = [  # type: ignore[attr-defined]
            c for c in calls if c.at < start and (boundary is None or c.at >= boundary)
        ]
        boundary = start
    if page.next_after is not None:
        return []
    return [c for c in calls if boundary is None or c.at >= boundary]


def pretty(value: Any) -> str:
    """A logged body or answer as readable text."""
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)
