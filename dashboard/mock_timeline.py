"""A trial's mock calls on its page: placed in the transcript between the events they happened
between (by time), and grouped by mock for the Mocks tab."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.template.loader import render_to_string

from dashboard.transcript_paging import TranscriptPage
from evals_app.models import Event, MockCall, Trial


@dataclass(frozen=True)
class MockCalls:
    name: str
    kind: str
    calls: list[MockCall]


@dataclass(frozen=True)
class LiveCalls:
    """Mock calls stored since an open trial page last got some, as htmx out-of-band HTML:
    ``before`` the new events (made before the first of them), ``after`` them, and the Mocks
    card again; ``last_id`` is the newest call sent."""

    before: str
    after: str
    last_id: int


def trial_mock_calls(trial: Trial, *, after_id: int | None = None) -> list[MockCall]:
    """Every call of the trial's mocks (those stored after ``after_id``, when given), in the
    order they happened (one query), each with its request and answer as readable text
    (``body_text``, ``response_text``)."""
    rows = trial.mock_calls.all()
    if after_id is not None:
        rows = rows.filter(pk__gt=after_id)
    calls = list(rows.order_by("at", "id"))
    for call in calls:
        record = call.record or {}
        call.body_text = pretty(record.get("body"))  # type: ignore[attr-defined]
        call.response_text = pretty(record.get("response"))  # type: ignore[attr-defined]
    return calls


def last_call_id(groups: list[MockCalls]) -> int:
    """The newest call a drawn page shows (-1 for none): where its live updates go on from."""
    return max((call.pk for group in groups for call in group.calls), default=-1)


def live_mock_calls(trial: Trial, *, after_id: int, events_after: int) -> LiveCalls:
    """The calls stored after ``after_id``, for a page whose transcript showed the events up to
    seq ``events_after`` and now gets the ones after it."""
    calls = trial_mock_calls(trial, after_id=after_id)
    if not calls:
        return LiveCalls("", "", after_id)
    first_new = (
        Event.objects.filter(trial=trial, seq__gt=events_after)
        .order_by("seq")
        .values_list("at", flat=True)
        .first()
    )
    earlier = [c for c in calls if first_new is not None and c.at < first_new]
    later = [c for c in calls if first_new is None or c.at >= first_new]

    def appended(part: list[MockCall]) -> str:
        if not part:
            return ""
        return render_to_string("dashboard/_mocks.html#live_calls", {"trial": trial, "calls": part})

    card = render_to_string(
        "dashboard/_mocks.html#mocks_card",
        {"trial": trial, "mock_groups": by_mock(trial, trial_mock_calls(trial)), "oob": True},
    )
    return LiveCalls(appended(earlier), appended(later) + card, max(c.pk for c in calls))


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
