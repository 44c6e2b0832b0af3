"""The grid as the reader narrowed it: this batch alone or merged with its reruns, filtered by
status and by a search over what the trials produced, and sorted by pass rate or by the
change against the suite's baseline.

The grid page reads the plain batch a page at a time through ``evals_app.grid_paging`` (filters
by suite, tag and status, sorts by pass rate, all in the database). What needs every row in
memory comes here: the grid merged with its reruns (from the trial rows of
``evals_app.merged``), a search over what the trials produced, and the sort by the change
against the baseline (the plain grid then from ``evals_app.pass_rates.batch_grid``). The filters run
on the rows in memory and the totals are counted again over what is shown, so the page still
costs a fixed number of queries.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from dashboard.search import matching_cells
from evals_app.merged import TrialRow, batch_cells, family_ids
from evals_app.models import Batch, CaseVersion, Trial, Variant
from evals_app.pass_rates import (
    BatchGrid,
    GridCell,
    GridColumn,
    GridRow,
    Tally,
    batch_grid,
    latest_version_number,
    sort_rows,
    sum_tallies,
    validity_warnings,
)

_STATUS = Trial.Status

# ?status= values: what a cell must hold to stay on the grid.
STATUS_FILTERS = {
    "failed": "failed",
    "errored": "errored",
    "timed_out": "timed out",
    "flaky": "flaky",
}
# ?trials= values: this batch alone, or with its reruns (latest trials per cell, or all).
TRIAL_MODES = {"batch": "This batch", "latest": "With reruns: latest", "all": "With reruns: all"}


@dataclass(frozen=True)
class GridQuery:
    """What the reader asked of the grid (query parameters, already read)."""

    suite: str = ""
    tag: str = ""
    search: str = ""
    sort: str = "case"
    status: str = ""
    trials: str = "batch"

    def __post_init__(self) -> None:
        if self.status not in STATUS_FILTERS:
            object.__setattr__(self, "status", "")
        if self.trials not in TRIAL_MODES:
            object.__setattr__(self, "trials", "batch")


@dataclass
class NarrowedGrid:
    """The grid shown, and what the page says about it."""

    grid: BatchGrid
    # The cells, (case version id, variant id), whose trials matched the search.
    matched: set[tuple[int, int]] = field(default_factory=set)
    # The batches read (this one, plus its reruns when merged).
    batch_ids: list[int] = field(default_factory=list)


def _row_tally(rows: Sequence[TrialRow]) -> Tally:
    counts = {status: 0 for status in _STATUS.values}
    for row in rows:
        counts[row.status] += 1
    return Tally(
        total=len(rows),
        passed=counts[_STATUS.PASSED],
        failed=counts[_STATUS.FAILED],
        timed_out=counts[_STATUS.TIMED_OUT],
        errored=counts[_STATUS.ERRORED],
        running=counts[_STATUS.RUNNING],
        tokens=sum(row.input_tokens + row.output_tokens for row in rows),
    )


def merged_grid(batch: Batch, mode: str, *, suite: str = "", tag: str = "") -> BatchGrid:
    """The grid of ``batch`` read with its reruns (``mode`` "latest" or "all", see
    ``evals_app.merged``): three queries plus one per rerun generation. A cell links to the
    newest run that holds its trials."""
    cells = batch_cells(batch, merged=True, mode=mode)
    version_ids = {rows[-1].case_version_id for rows in cells.values() if rows}
    variant_ids = {rows[-1].variant_id for rows in cells.values() if rows}
    versions = list(
        CaseVersion.objects.filter(pk__in=version_ids)
        .select_related("case__suite")
        .defer("definition", "sources")
        .annotate(latest_number=latest_version_number())
        .order_by("case__suite__slug", "case__slug", "number")
    )
    variants = list(Variant.objects.filter(pk__in=variant_ids).order_by("name", "pk"))
    by_name = {variant.name: variant for variant in variants}
    grid_cells: dict[tuple[str, str], dict[int, GridCell]] = {}
    for (suite_slug, case_slug, variant_name), rows in cells.items():
        if not rows or variant_name not in by_name:
            continue
        variant = by_name[variant_name]
        grid_cells.setdefault((suite_slug, case_slug), {})[variant.pk] = GridCell(
            run_id=max(row.run_id for row in rows),
            case_version_id=rows[-1].case_version_id,
            variant_id=variant.pk,
            tally=_row_tally(rows),
        )
    seen: set[tuple[str, str]] = set()
    all_rows = []
    for version in versions:
        key = (version.case.suite.slug, version.case.slug)
        if key in seen or key not in grid_cells:
            continue
        seen.add(key)
        row_cells: list[GridCell | None] = [grid_cells[key].get(v.pk) for v in variants]
        all_rows.append(GridRow(version, row_cells, sum_tallies(c.tally for c in row_cells if c)))
    suites = sorted({(row.case.suite.slug, row.case.suite.name) for row in all_rows})
    tags = sorted({t for row in all_rows for t in (row.case.tags or []) if isinstance(t, str)})
    shown = [
        row
        for row in all_rows
        if (not suite or row.case.suite.slug == suite) and (not tag or tag in (row.case.tags or []))
    ]
    warnings = validity_warnings(batch)
    return BatchGrid(
        batch=batch,
        columns=[GridColumn(v, Tally(), warnings.get(v.pk, {})) for v in variants],
        rows=shown,
        total=Tally(),
        suites=suites,
        tags=tags,
        case_count=len(all_rows),
    )


def cell_matches_status(
    cell: GridCell | None, status: str, flaky: Collection[tuple[int, int]]
) -> bool:
    """Whether a cell holds what the status filter asks for; ``flaky`` holds the flaky cells
    as (case version id, variant id)."""
    if cell is None:
        return False
    tally = cell.tally
    if status == "failed":
        return tally.failed > 0
    if status == "errored":
        return tally.errored > 0
    if status == "timed_out":
        return tally.timed_out > 0
    if status == "flaky":
        return (cell.case_version_id, cell.variant_id) in flaky
    return True


def narrow_grid(
    batch: Batch, query: GridQuery, *, flaky: Collection[tuple[int, int]] = ()
) -> NarrowedGrid:
    """The grid of ``batch`` as ``query`` narrows it. ``flaky`` holds the cells the flaky
    filter keeps, as (case version id, variant id). The rows sort by ``query.sort`` as ``batch_grid`` sorts them (the change
    against the baseline is sorted by the caller, who knows the baseline)."""
    if query.trials == "batch":
        grid = batch_grid(batch, suite=query.suite, tag=query.tag, sort=plain_sort(query.sort))
        batch_ids = [batch.pk]
    else:
        grid = merged_grid(batch, query.trials, suite=query.suite, tag=query.tag)
        batch_ids = family_ids(batch)
        # As batch_grid sorts a plain grid.
        sort_rows(grid.rows, plain_sort(query.sort), [c.variant for c in grid.columns])
    matched: set[tuple[int, int]] = set()
    rows = grid.rows
    needle = query.search.strip()
    if needle:
        matched = matching_cells(batch_ids, needle)
        lowered = needle.lower()
        rows = [
            row
            for row in rows
            if lowered in row.case.slug.lower()
            or lowered in row.case.name.lower()
            or any(
                cell is not None and (cell.case_version_id, cell.variant_id) in matched
                for cell in row.cells
            )
        ]
    if query.status:
        rows = [
            row
            for row in rows
            if any(cell_matches_status(cell, query.status, flaky) for cell in row.cells)
        ]
    grid.rows = rows
    grid.columns = [
        GridColumn(
            column.variant,
            sum_tallies(row.cells[i].tally for row in rows if row.cells[i] is not None),  # type: ignore[union-attr]
            column.warnings,
        )
        for i, column in enumerate(grid.columns)
    ]
    grid.total = sum_tallies(row.total for row in rows)
    return NarrowedGrid(grid=grid, matched=matched, batch_ids=batch_ids)


def plain_sort(sort: str) -> str:
    """The sorts ``batch_grid`` knows; the change against the baseline is sorted later."""
    return "case" if sort.lstrip("-") == "delta" else sort
