"""Filters that turn the numbers of a result into what a reader scans: durations, token
counts, pass rates."""

from __future__ import annotations

import json
from datetime import datetime

from django import template
from django.utils.safestring import SafeString

from dashboard.grid_cells import describe_tally, format_duration, render_grid_cell, render_total
from evals_app.stats import GridCell, Tally

register = template.Library()


@register.filter
def duration(ms: int | None) -> str:
    """``1234`` -> ``1.2 s``; ``754000`` -> ``12 m 34 s``; empty for no value."""
    return format_duration(ms)


@register.filter
def tokens(count: int | None) -> str:
    """``532`` -> ``532``; ``12345`` -> ``12.3k``; ``2500000`` -> ``2.5M``."""
    if count is None:
        return ""
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k"
    return f"{count / 1_000_000:.1f}M"


@register.filter
def thousands(count: int | None) -> str:
    """``12345`` -> ``12,345``."""
    return "" if count is None else f"{count:,}"


@register.filter
def percent(rate: float | None) -> str:
    return "–" if rate is None else f"{rate * 100:.0f}%"


@register.filter
def rate_style(rate: float | None) -> str:
    """The CSS custom property that places a cell on the red-to-green scale."""
    return "" if rate is None else f"--rate: {rate:.3f}"


@register.filter
def tally_summary(tally: Tally) -> str:
    """One line for a hover title: outcomes, then mean tokens and duration."""
    return describe_tally(tally)


@register.simple_tag
def grid_cell(cell: GridCell | None) -> SafeString:
    return render_grid_cell(cell)


@register.simple_tag
def grid_total(id_prefix: str, pk: object, tally: Tally) -> SafeString:
    """A total cell whose element id is ``id_prefix`` followed by ``pk``."""
    return render_total(f"{id_prefix}{pk}", tally)


@register.filter
def as_json(value: object) -> str:
    """Indented JSON for a stored spec or definition (escaped by the template as usual)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


@register.filter
def line_count(text: str | None) -> int:
    return 0 if not text else text.count("\n") + (0 if text.endswith("\n") else 1)


@register.filter
def origin_label(origin: dict | None) -> str:
    """Who wrote a turn's message: the eval's author, the responder, or the runner itself."""
    if not origin:
        return "authored"
    if "responder" in origin:
        return "responder"
    if "runner" in origin:
        return f"runner · {origin['runner']}" if isinstance(origin["runner"], str) else "runner"
    return ", ".join(str(key) for key in origin)


@register.filter
def origin_reason(origin: dict | None) -> str:
    """The responder's one-line reason for its reply, when it gave one."""
    responder = (origin or {}).get("responder")
    return str(responder.get("reason") or "") if isinstance(responder, dict) else ""


@register.filter
def since_start(moment: datetime | None, start: datetime | None) -> str:
    """How far into the trial something happened: ``+12.3 s``; empty without a start."""
    if moment is None or start is None:
        return ""
    ms = max(0, round((moment - start).total_seconds() * 1000))
    return f"+{duration(ms)}"
