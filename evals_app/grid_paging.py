"""One page of a batch's grid, ordered and paged by the database: the work of a request is
proportional to the rows it shows, not to the cells of the batch.

The rows (case versions) are filtered and ordered by suite then case, or by a pass rate counted
by the database per row (the row's, or one variant's); only the page's rows are then read with
their cells. Column and batch totals are aggregates over the rows the filters keep, grouped by
variant: a fixed number of queries, each returning at most a page of cells, a row per variant,
or one small tuple per case. Every count is read from the runs, which count their trials
(migration 0009), so no query here reads a trial: a 20,000-trial batch costs its 4,000 runs.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from django.db.models import Count, F, QuerySet, Sum

from evals_app.cost import CostSummary, cost_summary, run_cost_sums
from evals_app.models import Batch, CaseVersion, Run, Variant
from evals_app.pass_rates import (
    BatchGrid,
    GridColumn,
    GridRow,
    Tally,
    latest_version_number,
    run_cells,
    run_tally_sums,
    sum_tallies,
    tally_of_sums,
    validity_warnings,
)

# ?status= values the database answers alone, by the run count that must be above zero
# ("flaky" needs the caller's flaky cells).
_COUNT_OF_FILTER = {
    "failed": "trials_failed",
    "errored": "trials_errored",
    "timed_out": "trials_timed_out",
}
# A run's finished trials.
FINISHED = F("trials_passed") + F("trials_failed") + F("trials_timed_out") + F("trials_errored")


@dataclass
class GridPage:
    """The rows of one page, and how many rows the filters keep in all."""

    grid: BatchGrid
    row_count: int
    # Every row the filters keep (case version ids), in suite-then-case order.
    kept: list[int]
    # The cost of each column of the whole batch, whatever the filters keep.
    variant_costs: dict[int, CostSummary] | None = None


def grid_page(
    batch: Batch,
    *,
    suite: str = "",
    tag: str = "",
    status: str = "",
    flaky: Collection[tuple[int, int]] = (),
    sort: str = "case",
    offset: int = 0,
    limit: int = 100,
) -> GridPage:
    """The rows ``offset`` to ``offset + limit`` of ``batch``'s grid, as ``batch_grid`` would
    filter and sort them (``sort``: ``case``, ``[-]rate`` or ``[-]v<variant id>``); ``status``
    keeps the rows with a cell holding a failed, errored or timed-out trial, or (``flaky``) a
    cell in ``flaky``, the (case version id, variant id) pairs of the flaky cells. Six queries
    whatever the size of the batch, and one more each to sort by a rate, to answer a status
    filter, and to total the columns of rows the filters narrowed."""
    runs = Run.objects.filter(batch=batch)
    catalog = list(
        CaseVersion.objects.filter(pk__in=runs.values("case_version_id"))
        .order_by("case__suite__slug", "case__slug", "pk")
        .values_list("pk", "case__suite__slug", "case__suite__name", "case__tags")
    )
    suites = sorted({(slug, name) for _, slug, name, _ in catalog})
    tags = sorted({t for *_, case_tags in catalog for t in (case_tags or []) if isinstance(t, str)})
    kept = [
        pk
        for pk, slug, _, case_tags in catalog
        if (not suite or slug == suite) and (not tag or tag in (case_tags or []))
    ]
    if status in _COUNT_OF_FILTER:
        holding = set(
            runs.filter(**{f"{_COUNT_OF_FILTER[status]}__gt": 0})
            .order_by()
            .values_list("case_version_id", flat=True)
            .distinct()
        )
        kept = [pk for pk in kept if pk in holding]
    elif status == "flaky":
        flaky_versions = {version_id for version_id, _ in flaky}
        kept = [pk for pk in kept if pk in flaky_versions]
    narrowed = len(kept) < len(catalog)

    variants = list(Variant.objects.filter(pk__in=runs.values("variant_id")).order_by("name", "pk"))
    kept_runs = runs.filter(case_version_id__in=kept) if narrowed else runs
    page_ids = _ordered(kept, kept_runs, sort, variants)[offset : offset + limit]

    by_id = {
        version.pk: version
        for version in CaseVersion.objects.filter(pk__in=page_ids)
        .select_related("case__suite")
        # The definition and captured sources can be large and the grid shows neither.
        .defer("definition", "sources")
        .annotate(latest_number=latest_version_number())
    }
    cells = {
        (c.case_version_id, c.variant_id): c
        for c in run_cells(runs.filter(case_version_id__in=page_ids))
    }
    rows = []
    for pk in page_ids:
        row_cells = [cells.get((pk, variant.pk)) for variant in variants]
        rows.append(GridRow(by_id[pk], row_cells, sum_tallies(c.tally for c in row_cells if c)))

    # One scan of the whole batch's runs per variant reads the footer's costs and the validity
    # warnings' timeouts and errors with the column totals; filtered, the totals take another.
    whole_batch = list(
        runs.order_by().values("variant_id").annotate(**run_tally_sums(), **run_cost_sums())
    )
    batch_totals = {row["variant_id"]: tally_of_sums(row) for row in whole_batch}
    column_totals = batch_totals
    if narrowed:
        column_totals = {
            row["variant_id"]: tally_of_sums(row)
            for row in kept_runs.order_by().values("variant_id").annotate(**run_tally_sums())
        }
    warnings = validity_warnings(batch, column_totals=batch_totals)
    columns = [
        GridColumn(variant, column_totals.get(variant.pk, Tally()), warnings.get(variant.pk, {}))
        for variant in variants
    ]
    grid = BatchGrid(
        batch=batch,
        columns=columns,
        rows=rows,
        total=sum_tallies(column.total for column in columns),
        suites=suites,
        tags=tags,
        case_count=len(catalog),
    )
    return GridPage(
        grid=grid,
        row_count=len(kept),
        kept=kept,
        variant_costs={row["variant_id"]: cost_summary(row) for row in whole_batch},
    )


def _ordered(kept: list[int], runs: QuerySet[Run], sort: str, variants: list[Variant]) -> list[int]:
    """``kept`` (in suite-then-case order) as ``sort`` orders them: by the pass rate the
    database adds up per row from the row's runs (grouped by case version), then in
    suite-then-case order; rows with nothing finished go last in either direction, as
    ``batch_grid`` sorts them. Ordering the counted rows by slug in SQL would join every run
    to its case and suite before grouping; sorting one pair of counts per case here is less."""
    descending = sort.startswith("-")
    key = sort.lstrip("-")
    if key.startswith("v") and key[1:].isdigit():
        if int(key[1:]) not in {variant.pk for variant in variants}:
            return kept
        runs = runs.filter(variant_id=int(key[1:]))
    elif key != "rate":
        return kept
    counts = {
        version_id: (passed, finished)
        for version_id, passed, finished in runs.order_by()
        .values("case_version_id")
        .annotate(passed=Sum("trials_passed"), finished=Sum(FINISHED))
        .filter(finished__gt=0)
        .values_list("case_version_id", "passed", "finished")
    }
    rated = [pk for pk in kept if pk in counts]
    # Stable: equal rates keep the suite-then-case order of ``kept``.
    rated.sort(key=lambda pk: counts[pk][0] / counts[pk][1], reverse=descending)
    placed = set(rated)
    return rated + [pk for pk in kept if pk not in placed]


def column_cell_counts(batch: Batch, case_version_ids: list[int] | None) -> dict[int, list]:
    """``{variant id: [(passed, finished, cells), ...]}``: how many cells of ``batch`` (of the
    given case versions only, when given) came out with each count of passed and finished
    trials, in one query over the runs' counts: what the footer's pass@k estimates need, a
    few rows per variant however many cells the batch has."""
    runs = Run.objects.filter(batch=batch)
    if case_version_ids is not None:
        runs = runs.filter(case_version_id__in=case_version_ids)
    counts: dict[int, list] = {}
    for variant_id, passed, finished, cells in (
        runs.order_by()
        .annotate(finished=FINISHED)
        .values("variant_id", "trials_passed", "finished")
        .annotate(cells=Count("id"))
        .values_list("variant_id", "trials_passed", "finished", "cells")
    ):
        counts.setdefault(variant_id, []).append((passed, finished, cells))
    return counts
