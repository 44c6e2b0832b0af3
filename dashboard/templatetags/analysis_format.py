"""Filters for the pages that compare and weigh results: money, signed deltas, intervals,
p-values and the words for a trial status."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from django import template
from django.utils.safestring import SafeString

from dashboard.grid_cells import CellNote, render_grid_cell
from evals_app.estimators import pass_at_k, pass_hat_k
from evals_app.pass_rates import GridCell

register = template.Library()

_STATUS_WORDS = {
    "passed": "passed",
    "failed": "failed",
    "timed_out": "timed out",
    "errored": "errored",
    "running": "running",
    "queued": "queued",
}


@register.filter
def usd(amount: float | None) -> str:
    """``0.0123`` -> ``$0.0123``; ``12.5`` -> ``$12.50``; empty when unknown."""
    if amount is None:
        return ""
    if abs(amount) < 1:
        return f"${amount:.4f}"
    return f"${amount:,.2f}"


@register.filter
def status_words(status: str) -> str:
    return _STATUS_WORDS.get(status, status)


@register.filter
def words(name: str) -> str:
    """A snake_case name for people: ``case_version`` -> ``case version``."""
    return name.replace("_", " ")


@register.filter
def signed_points(delta: float | None) -> str:
    """A difference of two rates in percentage points: ``+12.5 pp``, ``−3.0 pp``, ``0 pp``."""
    if delta is None:
        return "–"
    points = delta * 100
    if abs(points) < 0.05:
        return "0 pp"
    sign = "+" if points > 0 else "−"
    return f"{sign}{abs(points):.1f} pp"


@register.filter
def rate_interval(bounds: Sequence[float] | None) -> str:
    """A 95% interval of a rate: ``[41%, 78%]``."""
    if not bounds:
        return ""
    low, high = bounds
    return f"[{low * 100:.0f}%, {high * 100:.0f}%]"


@register.filter
def points_interval(bounds: Sequence[float] | None) -> str:
    """A 95% interval of a difference, in percentage points: ``[−62, +4] pp``."""
    if not bounds:
        return ""
    low, high = bounds

    def signed(value: float) -> str:
        points = round(value * 100)
        return f"+{points}" if points > 0 else (f"−{-points}" if points < 0 else "0")

    return f"[{signed(low)}, {signed(high)}] pp"


@register.filter
def points(value: float | None) -> str:
    """A size of difference in percentage points: ``0.404`` -> ``40.4 pp``."""
    return "–" if value is None else f"{value * 100:.1f} pp"


class _Counted(Protocol):
    """A cell side's Tally or a case's outcome: finished trials, of which passed."""

    @property
    def finished(self) -> int: ...

    passed: int


@register.filter
def pass_k_line(counted: _Counted | None) -> str:
    """pass@n and pass^n of n finished trials: ``pass@3 1.00 · pass^3 0.00``."""
    if not counted or not counted.finished:
        return "–"
    n, c = counted.finished, counted.passed
    return f"pass@{n} {pass_at_k(n, c, n):.2f} · pass^{n} {pass_hat_k(n, c, n):.2f}"


@register.filter
def pass_k_top(curves: Mapping[str, Mapping[int, float]] | None) -> str:
    """A variant's pass@k and pass^k at the largest k all its cells reach."""
    at_k = (curves or {}).get("pass@k") or {}
    if not at_k:
        return "–"
    k = max(at_k)
    return f"pass@{k} {at_k[k]:.2f} · pass^{k} {curves['pass^k'][k]:.2f}"  # type: ignore[index]


@register.filter
def p_value(value: float | None) -> str:
    """``0.0312`` -> ``p = 0.031``; below 0.001 -> ``p < 0.001``."""
    if value is None:
        return ""
    if value < 0.001:
        return "p < 0.001"
    return f"p = {value:.3f}"


@register.filter
def ratio(value: float | None) -> str:
    """pass@k and pass^k: ``0.667`` -> ``0.67``."""
    return "–" if value is None else f"{value:.2f}"


@register.simple_tag
def noted_cell(
    cell: GridCell | None, notes: Mapping[tuple[int, int], CellNote] | None
) -> SafeString:
    """A grid cell with what the analysis adds to it (flaky history, pass@k, the change
    against the baseline); ``notes`` is keyed by (case version id, variant id)."""
    note = None
    if cell is not None and notes:
        note = notes.get((cell.case_version_id, cell.variant_id))
    return render_grid_cell(cell, note=note)
