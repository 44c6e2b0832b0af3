"""The home page: the case x variant grid of one batch, the latest by default; filtered by
status and by a search over what the trials produced, merged with the batch's reruns on
demand, with flaky cells, pass@k and the change against the baseline marked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import render
from django.utils import timezone

from dashboard.access import batches_for, get_or_404
from dashboard.grid_cells import render_grid_rows
from dashboard.grid_filters import (
    STATUS_FILTERS,
    TRIAL_MODES,
    GridQuery,
    NarrowedGrid,
    narrow_grid,
    plain_sort,
)
from dashboard.grid_notes import (
    Baseline,
    CellId,
    ColumnEstimate,
    cell_notes,
    column_estimate,
    column_estimate_of_counts,
    find_baseline,
    flaky_by_cell,
    footer_costs,
    sort_by_delta,
)
from dashboard.search import uses_full_text
from dashboard.views import HtmxHttpRequest, int_param
from evals_app.cost import CostSummary
from evals_app.cost_forecast import HISTORY_TRIALS, rerun_forecasts
from evals_app.flakiness import flaky_count, flaky_pairs
from evals_app.grid_paging import column_cell_counts, grid_page
from evals_app.models import Batch
from evals_app.pass_rates import GridColumn, GridRow
from runner.batches.regrade import regraded_from, regraded_trials
from runner.jobs.adaptive import savings

# The batch picker offers this many recent batches (plus the one shown, if older).
PICKER_SIZE = 50
# Rows drawn per request; the next ones load as the reader scrolls to them.
ROWS_PER_PAGE = 100


@dataclass(frozen=True)
class SortLink:
    """A header that sorts the rows: its query string and the direction it shows now."""

    href: str
    direction: str  # "asc", "desc" or "" when the rows are not sorted by it


@login_required
def grid(request: HtmxHttpRequest, batch_id: int | None = None) -> HttpResponse:
    batches = batches_for(request.user).order_by("-created_at", "-id")
    # ?batch= beyond 64 bits is a 400; malformed text stays a 404 (no such batch).
    chosen = batch_id or int_param(request, "batch") or request.GET.get("batch")
    batch = get_or_404(batches, pk=chosen) if chosen else batches.first()
    if batch is None:
        return render(request, "dashboard/no_batches.html")
    shown = _shown_rows(request, batch)
    if request.htmx and "offset" in request.GET:
        return render(request, "dashboard/grid.html#grid_rows", shown.fragment_context())
    context = {**shown.fragment_context(), **_page_context(request, batches, shown)}
    template = "dashboard/grid.html"
    if request.htmx and request.htmx.target == "grid":
        template += "#grid"
    return render(request, template, context)


@dataclass(frozen=True)
class _Page:
    """One page of the grid's rows, and what the rest of the grid is drawn from."""

    narrowed: NarrowedGrid
    rows: list[GridRow]
    row_count: int  # every row the filters keep, not only this page's
    baseline: Baseline | None
    # The rows the filters keep, when only this page was read and they are not every row.
    kept_ids: list[int] | None
    # Each column's cost over the whole batch, when reading the page found it already.
    known_costs: dict[int, CostSummary] | None
    read_in_sql: bool


def _read_page(batch: Batch, query: GridQuery, flagged: set[CellId], offset: int) -> _Page:
    """The rows from ``offset``, read one page at a time by the database, or (merged with
    reruns, searched, or sorted by the change against the baseline) read whole."""
    # Sorting by the change against the baseline needs the baseline first (and every row).
    by_delta = query.sort.lstrip("-") == "delta"
    delta_baseline = find_baseline(batch, query.suite) if by_delta else None
    if query.trials == "batch" and not query.search.strip() and delta_baseline is None:
        return _page_read_in_sql(batch, query, flagged, offset, by_delta=by_delta)
    baseline = delta_baseline if by_delta else find_baseline(batch, query.suite)
    return _page_read_whole(batch, query, flagged, offset, baseline)


def _page_read_in_sql(
    batch: Batch, query: GridQuery, flagged: set[CellId], offset: int, *, by_delta: bool
) -> _Page:
    """One page of rows, filtered, sorted and counted by the database (see grid_paging)."""
    page = grid_page(
        batch,
        suite=query.suite,
        tag=query.tag,
        status=query.status,
        flaky=flagged,
        sort=plain_sort(query.sort),
        offset=offset,
        limit=ROWS_PER_PAGE,
    )
    grid = page.grid
    # The page's suites spare finding the batch's suites again. Sorted by the change against
    # a baseline there is none (else the rows would have been read whole).
    baseline = (
        None if by_delta else find_baseline(batch, query.suite, sorted({s for s, _ in grid.suites}))
    )
    return _Page(
        narrowed=NarrowedGrid(grid=grid, batch_ids=[batch.pk]),
        rows=grid.rows,
        row_count=page.row_count,
        baseline=baseline,
        kept_ids=page.kept if page.row_count < grid.case_count else None,
        known_costs=page.variant_costs,
        read_in_sql=True,
    )


def _page_read_whole(
    batch: Batch, query: GridQuery, flagged: set[CellId], offset: int, baseline: Baseline | None
) -> _Page:
    """Every row read, then narrowed and sorted in memory (see grid_filters); one page shown."""
    narrowed = narrow_grid(batch, query, flaky=flagged)
    sort_by_delta(narrowed, baseline, query.sort)
    rows = narrowed.grid.rows
    return _Page(
        narrowed=narrowed,
        rows=rows[offset : offset + ROWS_PER_PAGE],
        row_count=len(rows),
        baseline=baseline,
        kept_ids=None,
        known_costs=None,
        read_in_sql=False,
    )


@dataclass(frozen=True)
class _ShownRows:
    """What the reader asked for, and the rows drawn for it: all the grid_rows fragment needs,
    on the first render and as the reader scrolls."""

    batch: Batch
    query: GridQuery
    show_estimates: bool
    flagged: set[CellId]
    page: _Page
    row_html: str
    more: str | None  # the query string of the next page, if any

    def fragment_context(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "grid": self.page.narrowed.grid,
            "row_html": self.row_html,
            "row_count": self.page.row_count,
            "more": self.more,
        }


def _shown_rows(request: HtmxHttpRequest, batch: Batch) -> _ShownRows:
    """The page of rows the request asks for, drawn. Reads the database (see _read_page)."""
    query = GridQuery(
        suite=request.GET.get("suite", ""),
        tag=request.GET.get("tag", ""),
        search=request.GET.get("q", ""),
        sort=request.GET.get("sort", "case"),
        status=request.GET.get("status", ""),
        trials=request.GET.get("trials", "batch"),
    )
    show_estimates = request.GET.get("estimates") == "1"
    # The flaky cells of the whole batch are counted by the database, and listed only for the
    # flaky filter, which keeps their rows. Their histories are read for the shown rows only.
    flagged = flaky_pairs(batch) if query.status == "flaky" else set()
    offset = max(int_param(request, "offset", 0), 0)
    page = _read_page(batch, query, flagged, offset)
    end = offset + ROWS_PER_PAGE
    more = None
    if end < page.row_count:
        more = "?" + urlencode({**{k: v for k, v in request.GET.items() if v}, "offset": end})
    notes = cell_notes(
        page.narrowed,
        query,
        flaky=flaky_by_cell(batch, {row.case_version.pk for row in page.rows}),
        baseline=page.baseline,
        show_estimates=show_estimates,
        rows=page.rows,
    )
    row_html = render_grid_rows(page.rows, notes, batch_id=batch.pk, csrf_token=get_token(request))
    return _ShownRows(batch, query, show_estimates, flagged, page, row_html, more)


def _page_context(
    request: HtmxHttpRequest, batches: QuerySet[Batch], shown: _ShownRows
) -> dict[str, Any]:
    """The rest of the page around the rows: the filters, the batch picker, the sort links and
    the footer's costs and estimates. A few queries, none per row."""
    batch, query, page = shown.batch, shown.query, shown.page
    grid = page.narrowed.grid
    column_costs, total_cost = footer_costs(batch, query, page.known_costs)
    estimates_by_variant = _column_estimates(batch, page) if shown.show_estimates else {}
    recent = list(batches.only("id", "created_at", "label", "status", "parent_id")[:PICKER_SIZE])
    if batch not in recent:
        recent.append(batch)
    return {
        "filters": {
            "suite": query.suite,
            "tag": query.tag,
            "search": query.search,
            "sort": query.sort,
            "status": query.status,
            "trials": query.trials,
            "estimates": shown.show_estimates,
        },
        "status_filters": STATUS_FILTERS,
        "trial_modes": TRIAL_MODES,
        "has_reruns": batch.reruns.exists(),
        "regraded_from": regraded_from(batch),
        "regraded": regraded_trials(batch) if regraded_from(batch) else [],
        # Adaptive trials: how many ran, and how many were saved against the maximum.
        "adaptive": savings(batch),
        "full_text": uses_full_text(),
        "baseline": page.baseline,
        "delta_sort": _sort_link(request, "delta", query.sort) if page.baseline else None,
        "toggle_estimates": _toggle(request, "estimates"),
        "total_cost": total_cost,
        "rerun_forecasts": rerun_forecasts(batch),
        "forecast_history": HISTORY_TRIALS,
        "flaky_count": len(shown.flagged) if query.status == "flaky" else flaky_count(batch),
        "recent_batches": recent,
        "case_sort": _sort_link(request, "case", query.sort),
        "rate_sort": _sort_link(request, "rate", query.sort),
        "columns": [(column, _column_sort(request, column, query.sort)) for column in grid.columns],
        "footer": [
            (
                column,
                estimates_by_variant.get(column.variant.pk),
                column_costs.get(column.variant.pk),
            )
            for column in grid.columns
        ],
        # Live updates catch up on what changed after this moment (see consumers.py).
        "rendered_at_ms": int(timezone.now().timestamp() * 1000),
    }


def _column_estimates(batch: Batch, page: _Page) -> dict[int, ColumnEstimate | None]:
    """pass@k and pass^k per variant over every row the filters keep, not just the page."""
    grid = page.narrowed.grid
    if not page.read_in_sql:
        return {
            column.variant.pk: column_estimate(
                [row.cells[i] for row in grid.rows if row.cells[i] is not None]  # type: ignore[misc]
            )
            for i, column in enumerate(grid.columns)
        }
    # Only a page of rows is in memory: the cells' counts come from the database.
    counts = column_cell_counts(batch, page.kept_ids)
    return {
        column.variant.pk: column_estimate_of_counts(counts.get(column.variant.pk, []))
        for column in grid.columns
    }


def _toggle(request: HtmxHttpRequest, name: str) -> str:
    """The query string that flips the on/off parameter ``name``."""
    params = {k: v for k, v in request.GET.items() if k not in (name, "offset") and v}
    if request.GET.get(name) != "1":
        params[name] = "1"
    return "?" + urlencode(params)


def _column_sort(request: HtmxHttpRequest, column: GridColumn, current: str) -> SortLink:
    return _sort_link(request, f"v{column.variant.pk}", current)


def _sort_link(request: HtmxHttpRequest, key: str, current: str) -> SortLink:
    """Sorting by a rate starts worst first (failing cases on top); a second click flips it."""
    params = {k: v for k, v in request.GET.items() if k not in ("sort", "offset") and v}
    if key == "case":
        direction, next_sort = ("asc" if current == "case" else ""), "case"
    elif current == key:
        direction, next_sort = "asc", f"-{key}"
    elif current == f"-{key}":
        direction, next_sort = "desc", key
    else:
        direction, next_sort = "", key
    return SortLink(href="?" + urlencode({**params, "sort": next_sort}), direction=direction)
