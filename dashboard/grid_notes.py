"""What the grid adds to its cells on top of passed/total: the flaky mark with the history that
shows it, pass@k and pass^k on demand, and the change against the suite's baseline; plus the
per-column estimates and cost per passed trial of the footer.

The estimators are evals_app.estimators'; flakiness is evals_app.flakiness'; the baseline's
trials are read as compare reads them (evals_app.merged). A fixed number of queries.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from dashboard.grid_cells import CellNote
from dashboard.grid_filters import GridQuery, NarrowedGrid, cell_matches_status
from evals_app.comparison import tally_of
from evals_app.cost import CostSummary, combined_cost, summarize_costs, variant_costs
from evals_app.estimators import pass_at_k, pass_hat_k
from evals_app.flakiness import FlakyHistory, flaky_cells
from evals_app.merged import batch_cells
from evals_app.models import Batch
from evals_app.pass_rates import GridCell, GridRow

CellId = tuple[int, int]  # (case version id, variant id)


def cell_id(cell: GridCell) -> CellId:
    return (cell.case_version_id, cell.variant_id)


def flaky_by_cell(
    batch: Batch, case_version_ids: Collection[int] | None = None
) -> dict[CellId, FlakyHistory]:
    """The flaky cells of ``batch`` by (case version, variant), with their histories; of the
    rows ``case_version_ids`` only, when given (two queries)."""
    return {
        (h.case_version_id, h.variant_id): h for h in flaky_cells(batch, case_version_ids).values()
    }


def estimates(passed: int, finished: int) -> tuple[tuple[str, float], ...]:
    """pass@1, pass@n and pass^n of one cell from its n finished trials (n >= 1)."""
    if finished < 1:
        return ()
    pairs = [("pass@1", pass_at_k(finished, passed, 1))]
    if finished > 1:
        pairs.append((f"pass@{finished}", pass_at_k(finished, passed, finished)))
        pairs.append((f"pass^{finished}", pass_hat_k(finished, passed, finished)))
    return tuple(pairs)


@dataclass(frozen=True)
class ColumnEstimate:
    """A variant's pass@k and pass^k: the mean over its cells, at the k every cell reaches."""

    k: int
    pass_at: float
    pass_hat: float


def column_estimate(cells: list[GridCell]) -> ColumnEstimate | None:
    return column_estimate_of_counts([(c.tally.passed, c.tally.finished, 1) for c in cells])


def column_estimate_of_counts(counts: list[tuple[int, int, int]]) -> ColumnEstimate | None:
    """The estimate of a column from its cells' counts: (passed, finished, how many cells
    came out so), the cells that came out alike counted once."""
    finished = [(passed, n, cells) for passed, n, cells in counts if n]
    if not finished:
        return None
    k = min(n for _, n, _ in finished)
    cells = sum(c for *_, c in finished)
    pass_at = sum(pass_at_k(n, passed, k) * c for passed, n, c in finished) / cells
    pass_hat = sum(pass_hat_k(n, passed, k) * c for passed, n, c in finished) / cells
    return ColumnEstimate(k, pass_at, pass_hat)


@dataclass
class Baseline:
    """The batch the grid measures its cells against, and its pass rates by cell name."""

    batch: Batch
    suite: str
    # (suite slug, case slug, variant name) -> pass rate
    rates: dict[tuple[str, str, str], float] = field(default_factory=dict)
    # (suite slug, case slug) -> pass rate over the case's variants
    row_rates: dict[tuple[str, str], float] = field(default_factory=dict)


def find_baseline(
    batch: Batch, suite: str = "", suite_slugs: list[str] | None = None
) -> Baseline | None:
    """The baseline of ``suite`` (else of the first of the batch's suites that has one), read
    with its reruns; None when none is marked, or the batch is that baseline. Three queries
    and one per rerun generation of the baseline; one fewer when the caller knows the batch's
    ``suite_slugs`` already."""
    slugs = [suite] if suite else (batch.suite_slugs() if suite_slugs is None else suite_slugs)
    marked = (
        Batch.objects.filter(
            organization_id=batch.organization_id,
            is_baseline=True,
            runs__case_version__case__suite__slug__in=slugs,
        )
        .order_by("-created_at", "-id")
        .values_list("id", "runs__case_version__case__suite__slug")
        .distinct()
    )
    by_suite: dict[str, int] = {}
    for batch_id, slug in marked:
        by_suite.setdefault(slug, batch_id)
    chosen = next(((slug, by_suite[slug]) for slug in slugs if slug in by_suite), None)
    if chosen is None or chosen[1] == batch.pk:
        return None
    found = Batch.objects.get(pk=chosen[1])
    baseline = Baseline(found, chosen[0])
    per_row: dict[tuple[str, str], list] = {}
    for key, rows in batch_cells(found, merged=True).items():
        tally = tally_of(rows)
        if tally.pass_rate is not None:
            baseline.rates[key] = tally.pass_rate
        per_row.setdefault(key[:2], []).extend(rows)
    for row_key, row_trials in per_row.items():
        rate = tally_of(row_trials).pass_rate
        if rate is not None:
            baseline.row_rates[row_key] = rate
    return baseline


def row_delta(row: GridRow, baseline: Baseline) -> float | None:
    rate = row.total.pass_rate
    before = baseline.row_rates.get((row.case.suite.slug, row.case.slug))
    return None if rate is None or before is None else rate - before


def sort_by_delta(narrowed: NarrowedGrid, baseline: Baseline | None, sort: str) -> None:
    """``delta``: the biggest drop first; ``-delta``: the biggest gain first. Rows with no
    baseline to measure against go last."""
    if baseline is None or sort.lstrip("-") != "delta":
        return
    descending = sort.startswith("-")
    deltas = [row_delta(row, baseline) for row in narrowed.grid.rows]
    order = sorted(
        range(len(deltas)),
        key=lambda i: (
            deltas[i] is None,
            -(deltas[i] or 0.0) if descending else (deltas[i] or 0.0),
        ),
    )
    narrowed.grid.rows = [narrowed.grid.rows[i] for i in order]


def cell_notes(
    narrowed: NarrowedGrid,
    query: GridQuery,
    *,
    flaky: dict[CellId, FlakyHistory],
    baseline: Baseline | None,
    show_estimates: bool,
    rows: list[GridRow],
) -> dict[CellId, CellNote]:
    """The note of every cell of ``rows`` that has something to add."""
    notes: dict[CellId, CellNote] = {}
    variant_names = {column.variant.pk: column.variant.name for column in narrowed.grid.columns}
    for row in rows:
        for cell in row.cells:
            if cell is None:
                continue
            key = cell_id(cell)
            history = flaky.get(key)
            delta = None
            if baseline is not None and cell.tally.pass_rate is not None:
                before = baseline.rates.get(
                    (row.case.suite.slug, row.case.slug, variant_names.get(cell.variant_id, ""))
                )
                delta = None if before is None else cell.tally.pass_rate - before
            note = CellNote(
                flaky_reason=history.reason if history else "",
                flaky_history=tuple(
                    f"batch #{h.batch_id}{f' ({h.label})' if h.label else ''}: "
                    f"{h.passed}/{h.graded} passed"
                    for h in history.history
                )
                if history
                else (),
                estimates=estimates(cell.tally.passed, cell.tally.finished)
                if show_estimates
                else (),
                delta=delta if query.sort.lstrip("-") == "delta" else None,
                matched=key in narrowed.matched,
                dimmed=bool(query.status) and not cell_matches_status(cell, query.status, flaky),
            )
            if note != CellNote():
                notes[key] = note
    return notes


def footer_costs(
    batch: Batch, query: GridQuery, known: dict[int, CostSummary] | None = None
) -> tuple[dict[int, CostSummary], CostSummary]:
    """Cost per variant (by variant id) and for the whole batch, as the grid's trials mode
    reads it: one query alone (none when ``known``, the batch's costs per variant, was read
    already), one or two more merged."""
    if query.trials == "batch":
        costs = variant_costs(batch) if known is None else known
        return costs, combined_cost(costs.values())
    cells = batch_cells(batch, merged=True, mode=query.trials)
    by_variant: dict[int, list] = {}
    everything = []
    for rows in cells.values():
        for row in rows:
            by_variant.setdefault(row.variant_id, []).append(row)
            everything.append(row)

    def summary(rows: list) -> CostSummary:
        return summarize_costs([r.cost_usd for r in rows], sum(1 for r in rows if r.passed))

    return {vid: summary(rows) for vid, rows in by_variant.items()}, summary(everything)
