"""The home page: the case x variant grid of one batch, the latest by default; filtered by
status and by a search over what the trials produced, merged with the batch's reruns on
demand, with flaky cells, pass@k and the change against the baseline marked."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
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
from evals_app.flakiness import flaky_count, flaky_pairs
from evals_app.grid_paging import column_cell_counts, grid_page
from evals_app.models import Batch
from evals_app.pass_rates import BatchGrid, GridColumn

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

    query = GridQuery(
        suite=request.GET.get("suite", ""),
        tag=request.GET.get("tag", ""),
        search=request.GET.get("q", ""),
        sort=request.GET.get("sort", "case"),
        status=request.GET.get("status", ""),
        trials=request.GET.get("trials", "batch"),
    )
    show_estimates = request.GET.get("estimates") == "1"
    filters = {
        "suite": query.suite,
        "tag": query.tag,
        "search": query.search,
        "sort": query.sort,
        "status": query.status,
        "trials": query.trials,
        "estimates": show_estimates,
    }
    # The flaky cells of the whole batch are counted by the database, and listed only for the
    # flaky filter, which keeps their rows. Their histories are read for the shown rows only.
    flagged = flaky_pairs(batch) if query.status == "flaky" else set()
    offset = max(int_param(request, "offset", 0), 0)
    end = offset + ROWS_PER_PAGE
    # Sorting by the change against the baseline needs the baseline first (and every row);
    # otherwise the page's suites spare finding the batch's suites again.
    by_delta = query.sort.lstrip("-") == "delta"
    baseline = find_baseline(batch, query.suite) if by_delta else None
    in_sql = query.trials == "batch" and not query.search.strip() and baseline is None
    kept_ids: list[int] | None = None
    known_costs = None
    if in_sql:
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
        narrowed = NarrowedGrid(grid=page.grid, batch_ids=[batch.pk])
        grid, rows, row_count = page.grid, page.grid.rows, page.row_count
        if row_count < grid.case_count:
            kept_ids = page.kept
        known_costs = page.variant_costs
        if not by_delta:
            baseline = find_baseline(batch, query.suite, sorted({s for s, _ in grid.suites}))
    else:
        # Merged with reruns, searched, or sorted by the change against the baseline: the
        # rows are read whole and narrowed in memory (see grid_filters).
        if not by_delta:
            baseline = find_baseline(batch, query.suite)
        narrowed = narrow_grid(batch, query, flaky=flagged)
        sort_by_delta(narrowed, baseline, query.sort)
        grid = narrowed.grid
        rows, row_count = grid.rows[offset:end], len(grid.rows)
    more = None
    if end < row_count:
        more = "?" + urlencode({**{k: v for k, v in request.GET.items() if v}, "offset": end})
    flaky = flaky_by_cell(batch, {row.case_version.pk for row in rows})
    notes = cell_notes(
        narrowed,
        query,
        flaky=flaky,
        baseline=baseline,
        show_estimates=show_estimates,
        rows=rows,
    )
    row_html = render_grid_rows(rows, notes, batch_id=batch.pk, csrf_token=get_token(request))
    if request.htmx and "offset" in request.GET:
        return render(
            request,
            "dashboard/grid.html#grid_rows",
            {
                "batch": batch,
                "grid": grid,
                "row_html": row_html,
                "row_count": row_count,
                "more": more,
            },
        )
    column_costs, total_cost = footer_costs(batch, query, known_costs)
    estimates_by_variant = (
        _column_estimates(batch, grid, kept_ids, in_sql=in_sql) if show_estimates else {}
    )
    recent = list(batches.only("id", "created_at", "label", "status", "parent_id")[:PICKER_SIZE])
    if batch not in recent:
        recent.append(batch)
    context = {
        "batch": batch,
        "grid": grid,
        "row_html": row_html,
        "row_count": row_count,
        "more": more,
        "filters": filters,
        "status_filters": STATUS_FILTERS,
        "trial_modes": TRIAL_MODES,
        "has_reruns": batch.reruns.exists(),
        "full_text": uses_full_text(),
        "baseline": baseline,
        "delta_sort": _sort_link(request, "delta", query.sort) if baseline else None,
        "toggle_estimates": _toggle(request, "estimates"),
        "total_cost": total_cost,
        "flaky_count": len(flagged) if query.status == "flaky" else flaky_count(batch),
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
    template = "dashboard/grid.html"
    if request.htmx and request.htmx.target == "grid":
        template += "#grid"
    return render(request, template, context)


def _column_estimates(
    batch: Batch, grid: BatchGrid, kept_ids: list[int] | None, *, in_sql: bool
) -> dict[int, ColumnEstimate | None]:
    """pass@k and pass^k per variant over every row the filters keep (``kept_ids``, None for
    every row), not just the page."""
    if not in_sql:
        return {
            column.variant.pk: column_estimate(
                [row.cells[i] for row in grid.rows if row.cells[i] is not None]  # type: ignore[misc]
            )
            for i, column in enumerate(grid.columns)
        }
    # Only a page of rows is in memory: the cells' counts come from the database.
    counts = column_cell_counts(batch, kept_ids)
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
