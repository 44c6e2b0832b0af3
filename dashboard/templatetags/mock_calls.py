"""``{{ mock_groups|last_mock_call }}``: the newest mock call a trial page shows, which its
live updates go on from (dashboard.consumers)."""

from __future__ import annotations

from django import template

from dashboard.mock_timeline import MockCalls, last_call_id

register = template.Library()


@register.filter
def last_mock_call(groups: list[MockCalls] | None) -> int:
    return last_call_id(groups or [])
