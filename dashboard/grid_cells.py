"""The grid's cells and totals as HTML, for the first render of the page and for every live
update alike.

A 500 x 8 grid has 4,000 cells; rendered through the template engine each costs about a
millisecond, here a few microseconds, so the page's server time is spent on the data rather
than on markup. A whole row is drawn here too: the template's loop, URL tags and CSRF tag per
row cost more than the row's data.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from html import escape as _html_escape

from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from evals_app.pass_rates import GridCell, GridRow, Tally


def escape(text: object) -> str:
    """Django's ``escape`` without its lazy-string wrapper, which cost more than the escaping
    itself over a page of 800 cells; the same output."""
    return _html_escape(str(text))


_ICON = '<svg class="icon"><use href="#i-{}"/></svg>'
_PLACEHOLDER = 999_999_999


def format_duration(ms: int | None) -> str:
    """``1234`` -> ``1.2 s``; ``754000`` -> ``12 m 34 s``; empty for no value."""
    if ms is None:
        return ""
    seconds = ms / 1000
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} m {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} m"


def describe_tally(tally: Tally) -> str:
    """One line for a hover title: outcomes, then mean tokens and duration per trial."""
    parts = [f"{tally.passed}/{tally.total} passed"]
    for count, label in (
        (tally.failed, "failed"),
        (tally.timed_out, "timed out"),
        (tally.errored, "errored"),
        (tally.budget_exhausted, "stopped by the budget"),
        (tally.running, "running"),
        (tally.queued, "queued"),
    ):
        if count:
            parts.append(f"{count} {label}")
    if tally.retried:
        lost = f"{tally.retried} " if tally.total > 1 else ""
        parts.append(f"{lost}worker lost, retried (attempt {tally.last_attempt})")
    if tally.mean_tokens is not None:
        parts.append(f"{tally.mean_tokens:,} tokens per trial")
    if tally.mean_duration_ms is not None:
        parts.append(f"{format_duration(tally.mean_duration_ms)} per trial")
    return " · ".join(parts)


def _url_pattern(name: str, *args: int) -> str:
    """``name``'s URL with ``{}`` where its last argument goes."""
    return reverse(name, args=[*args, _PLACEHOLDER]).replace(str(_PLACEHOLDER), "{}")


@cache
def _run_url_pattern() -> str:
    # Reversing once and filling in the id is ~50x cheaper than 4,000 calls to reverse().
    return _url_pattern("run")


def _rate_style(rate: float | None) -> str:
    return "" if rate is None else f' style="--rate: {rate:.3f}"'


def _oob(oob: bool) -> str:
    return ' hx-swap-oob="outerHTML"' if oob else ""


@dataclass(frozen=True)
class CellNote:
    """What the grid's analysis adds to a cell: its flaky history (one line per batch, oldest
    first, and the reason), pass@k and pass^k as (label, value) pairs, the change against the
    baseline, and whether the search matched its trials or the status filter left it out."""

    flaky_reason: str = ""
    flaky_history: tuple[str, ...] = ()
    estimates: tuple[tuple[str, float], ...] = ()
    delta: float | None = None
    matched: bool = False
    dimmed: bool = False


def _signed_points(delta: float) -> str:
    points = round(delta * 100)
    return f"+{points} pp" if points > 0 else (f"−{-points} pp" if points < 0 else "0 pp")


def _note_html(note: CellNote) -> tuple[str, str]:
    """(marks inside the link, blocks after it) for a cell's note."""
    inside = []
    for label, value in note.estimates:
        inside.append(f'<span class="cell-passk">{escape(label)} {value:.2f}</span>')
    if note.delta is not None:
        kind = "regression" if note.delta < 0 else "improvement" if note.delta > 0 else "same"
        inside.append(
            f'<span class="cell-delta delta--{kind}" title="change against the baseline">'
            f"{_signed_points(note.delta)}</span>"
        )
    after = ""
    if note.flaky_reason:
        items = "".join(f"<li>{escape(line)}</li>" for line in note.flaky_history)
        after = (
            f'<details class="flaky"><summary class="mark mark--flaky" title="flaky: '
            f'{escape(note.flaky_reason)}">flaky</summary><ul class="flaky-history">{items}</ul>'
            "</details>"
        )
    return "".join(inside), after


def render_grid_cell(
    cell: GridCell | None, *, oob: bool = False, note: CellNote | None = None
) -> SafeString:
    """A ``<td id="cell-<run id>">``: passed/total on the colour scale, with marks for timed-out,
    errored and unfinished trials, linking to the run page; ``note`` adds the flaky mark with
    its history, pass@k and the change against the baseline."""
    if cell is None:
        return mark_safe('<td class="cell cell--empty" title="not run in this batch">–</td>')
    tally = cell.tally
    classes = "cell cell--pending" if tally.pass_rate is None else "cell"
    inside, after = _note_html(note) if note else ("", "")
    if note and note.dimmed:
        classes += " cell--filtered-out"
    if note and note.matched:
        classes += " cell--matched"
    # An attribute, not a class: the class says the outcome, the attribute an extra fact.
    flaky = " data-flaky" if note and note.flaky_reason else ""
    marks = []
    if tally.timed_out:
        marks.append(
            f'<span class="mark mark--timeout" title="{tally.timed_out} timed out">'
            f"{_ICON.format('clock')}{tally.timed_out}</span>"
        )
    if tally.errored:
        marks.append(
            f'<span class="mark mark--error" title="{tally.errored} errored">'
            f"{_ICON.format('alert')}{tally.errored}</span>"
        )
    if tally.budget_exhausted:
        marks.append(
            f'<span class="mark mark--budget" title="{tally.budget_exhausted} stopped by the '
            f"batch's budget\">${tally.budget_exhausted}</span>"
        )
    if tally.pending:
        marks.append(
            f'<span class="mark mark--pending" title="{tally.pending} not finished">'
            f'<span class="spinner"></span>{tally.pending}</span>'
        )
    url = _run_url_pattern().format(cell.run_id)
    return mark_safe(  # noqa: S308 - every value is a number or escaped
        f'<td id="cell-{cell.run_id}" class="{classes}"{flaky}{_rate_style(tally.pass_rate)}{_oob(oob)}>'
        f'<a href="{url}" title="{escape(describe_tally(tally))}">'
        f'<span class="cell-score">{tally.passed}/{tally.total}</span>{"".join(marks)}{inside}</a>'
        f"{after}</td>"
    )


def render_total(total_id: str, tally: Tally, *, oob: bool = False) -> SafeString:
    """A row's, a column's or the batch's total: the pass rate and passed/total."""
    rate = tally.pass_rate
    classes = "total total--pending" if rate is None else "total"
    percent = "–" if rate is None else f"{rate * 100:.0f}%"
    return mark_safe(  # noqa: S308 - every value is a number or escaped
        f'<td id="{escape(total_id)}" class="{classes}"{_rate_style(rate)} title="{escape(describe_tally(tally))}"'
        f'{_oob(oob)}><span class="total-rate">{percent}</span>'
        f'<span class="total-count">{tally.passed}/{tally.total}</span></td>'
    )


_RERUN_ICON = '<svg class="icon"><use href="#i-rerun"/></svg>'


def render_grid_rows(
    rows: list[GridRow],
    notes: dict[tuple[int, int], CellNote],
    *,
    batch_id: int,
    csrf_token: str,
) -> SafeString:
    """The ``<tr id="case-row-<version id>">`` of each row: the case, its version (and the
    latest one when newer), suite and tags, its cells with their notes, its total, and the
    form that reruns it under every variant."""
    case_url = _url_pattern("case")
    rerun_url = _url_pattern("rerun-case", batch_id)
    csrf = f'<input type="hidden" name="csrfmiddlewaretoken" value="{escape(csrf_token)}">'
    html = []
    for row in rows:
        version, case = row.case_version, row.case
        slug = escape(case.slug)
        latest = getattr(version, "latest_number", None)
        newer = ""
        if latest and latest > version.number:
            newer = (
                '<span class="version version--older" title="Reruns of this row rerun '
                f"v{version.number}, the version shown; the latest recorded version is "
                f'v{latest}">latest v{latest}</span>'
            )
        tags = "".join(f' <span class="tag">{escape(tag)}</span>' for tag in case.tags or [])
        cells = "".join(
            render_grid_cell(
                cell,
                note=notes.get((cell.case_version_id, cell.variant_id)) if cell else None,
            )
            for cell in row.cells
        )
        html.append(
            f'<tr id="case-row-{version.pk}"><th scope="row" class="case-col">'
            f'<a class="case-name" href="{case_url.format(case.pk)}" title="History of {slug}">'
            f'{slug}</a> <span class="version" title="case version">v{version.number}</span> '
            f'{newer} <span class="case-meta">{escape(case.suite.slug)}{tags}</span></th>'
            f"{cells}{render_total(f'row-total-{version.pk}', row.total)}"
            f'<td class="row-actions"><form method="post" action="{rerun_url.format(case.pk)}">'
            f'{csrf}<button type="submit" class="icon-button" title="Rerun {slug} under every '
            f'variant" aria-label="Rerun {slug}">{_RERUN_ICON}</button></form></td></tr>'
        )
    return mark_safe("".join(html))  # noqa: S308 - every value is a number or escaped
