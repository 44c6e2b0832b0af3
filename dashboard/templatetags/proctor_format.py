"""Filters that turn the numbers of a result into what a reader scans: durations, token
counts, pass rates, weights; the labels of who wrote a turn; and workspace paths."""

from __future__ import annotations

import json
from datetime import datetime

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from dashboard.grid_cells import describe_tally, format_duration, render_grid_cell, render_total
from evals_app.pass_rates import GridCell, Tally
from runner.sandboxes.workspace_paths import shown_path

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
def workspace_path(path: str) -> str:
    """A changed file's path relative to the workspace, also in a trial recorded when the
    sandbox's absolute path was stored (``/tmp/proctor-trial-…/workspace/calc.py``)."""
    return shown_path(path)


@register.filter
def as_json(value: object) -> str:
    """Indented JSON for a stored spec or definition (escaped by the template as usual)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


@register.filter
def line_count(text: str | None) -> int:
    return 0 if not text else text.count("\n") + (0 if text.endswith("\n") else 1)


@register.filter
def origin_label(origin: dict | None) -> str:
    """Who wrote a turn's message: the eval's author, the responder, the simulated user, or
    the runner itself."""
    kind = origin_kind(origin)
    if kind == "simulated_user":
        return "simulated user"
    if kind == "runner" and isinstance(origin, dict) and isinstance(origin["runner"], str):
        return f"runner · {origin['runner']}"
    if kind == "other" and origin:
        return ", ".join(str(key) for key in origin)
    return kind


@register.filter
def origin_kind(origin: dict | None) -> str:
    """``authored``, ``responder``, ``simulated_user``, ``runner`` or ``other``: a CSS class
    and the switch the turn template reads."""
    if not origin:
        return "authored"
    for kind in ("responder", "simulated_user", "runner"):
        if kind in origin:
            return kind
    return "other"


@register.filter
def origin_model(origin: dict | None) -> str:
    """The model that wrote a responder's or simulated user's message, when recorded."""
    for kind in ("responder", "simulated_user"):
        written = (origin or {}).get(kind)
        if isinstance(written, dict) and written.get("model"):
            return str(written["model"])
    return ""


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


@register.filter
def weight(value: float | None) -> str:
    """An assertion's weight: ``2``, ``0.5``; ``info only`` for 0 (it never decides)."""
    if value is None:
        return ""
    return "info only" if value <= 0 else f"{value:g}"


@register.filter
def weight_range(lightest: float | None, heaviest: float | None) -> str:
    """The weights a metric's assertions carry: ``2``, ``0.5–2``, or ``info only``."""
    if heaviest is None:
        return ""
    if heaviest <= 0:
        return "info only"
    if lightest is None or lightest == heaviest:
        return f"{heaviest:g}"
    return f"{lightest:g}–{heaviest:g}"


@register.filter
def prompt_messages(prompt: object) -> list[dict[str, str]]:
    """A consultation's prompt as ``[{"role", "content"}]``; anything of another shape is one
    message holding its JSON, so nothing recorded is hidden."""
    if isinstance(prompt, list) and all(isinstance(m, dict) and "content" in m for m in prompt):
        return [
            {
                "role": str(m.get("role", "")),
                "content": m["content"] if isinstance(m["content"], str) else as_json(m["content"]),
            }
            for m in prompt
        ]
    if prompt in (None, "", [], {}):
        return []
    return [{"role": "", "content": prompt if isinstance(prompt, str) else as_json(prompt)}]


@register.filter
def breakable(text: object) -> SafeString:
    """Escaped text that may wrap after ``_`` and ``:`` (long warning names in a narrow
    column)."""
    escaped = str(escape(str(text)))
    return mark_safe(escaped.replace("_", "_<wbr>").replace(":", ":<wbr>"))  # noqa: S308 - escaped


# A stored event field holds up to 64 KiB (PROCTOR_MAX_EVENT_FIELD_BYTES); a page shows this
# much of each, so a trial of many long values stays a page a browser opens at once.
PAGE_CLIP_CHARS = 10_000


@register.simple_tag
def clipped(text: object, trial: object = None) -> SafeString:
    """``text`` escaped, cut at PAGE_CLIP_CHARS with a note of how many characters are left out
    and links to the trial's ``events.jsonl`` (the stored value) and ``output.log`` (the raw
    line)."""
    if text is None:
        return mark_safe("")
    text = str(text)
    if len(text) <= PAGE_CLIP_CHARS:
        return mark_safe(escape(text))
    rest = len(text) - PAGE_CLIP_CHARS
    note = f"… [clipped: {rest:,} more characters"
    pk = getattr(trial, "pk", None)
    if pk is not None:
        from django.urls import reverse

        links = " · ".join(
            f'<a href="{escape(reverse("trial-artifact", args=[pk, name]))}" target="_blank" '
            f'rel="noopener">{name}</a>'
            for name in ("events.jsonl", "output.log")
        )
        note += f"; in full in {links}"
    return mark_safe(f'{escape(text[:PAGE_CLIP_CHARS])}<span class="clip-note">{note}]</span>')
