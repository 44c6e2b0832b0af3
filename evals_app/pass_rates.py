"""Pass rates: per grid cell (case version x variant) of a batch, per row and column, and per
version and variant across a case's history; the validity warnings of each variant; and the
pass rate of each weighted assertion's metric per variant.

Every function here costs a fixed number of queries whatever the size of the batch: trials are
counted by the database, never fetched and counted one by one. A batch's cells, rows and
columns add up the counts each run keeps of its trials (migration 0009), so they read a row per
run rather than per trial.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter
from typing import Any

from django.db.models import (
    Count,
    F,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
)

from evals_app.models import Batch, Case, CaseVersion, Run, Trial, Variant

_STATUS = Trial.Status


@dataclass(frozen=True)
class Tally:
    """How the trials of a cell (or a row, a column, a whole batch) came out."""

    total: int = 0
    passed: int = 0
    failed: int = 0
    timed_out: int = 0
    errored: int = 0
    running: int = 0
    # Ended by the batch's budget: neither finished (no pass rate counts them) nor pending.
    budget_exhausted: int = 0
    tokens: int = 0
    # Summed over the trials that recorded a duration; ``timed`` counts them.
    duration_ms: int = 0
    timed: int = 0
    # Trials run again after their worker was lost, and the highest attempt among them.
    retried: int = 0
    last_attempt: int = 0

    @property
    def queued(self) -> int:
        return self.total - self.finished - self.running - self.budget_exhausted

    @property
    def finished(self) -> int:
        return self.passed + self.failed + self.timed_out + self.errored

    @property
    def pending(self) -> int:
        return self.total - self.finished - self.budget_exhausted

    @property
    def pass_rate(self) -> float | None:
        """Passed over finished trials; None while nothing has finished."""
        return self.passed / self.finished if self.finished else None

    @property
    def mean_tokens(self) -> int | None:
        return round(self.tokens / self.finished) if self.finished else None

    @property
    def mean_duration_ms(self) -> int | None:
        return round(self.duration_ms / self.timed) if self.timed else None

    def __add__(self, other: Tally) -> Tally:
        return Tally(
            total=self.total + other.total,
            passed=self.passed + other.passed,
            failed=self.failed + other.failed,
            timed_out=self.timed_out + other.timed_out,
            errored=self.errored + other.errored,
            running=self.running + other.running,
            budget_exhausted=self.budget_exhausted + other.budget_exhausted,
            tokens=self.tokens + other.tokens,
            duration_ms=self.duration_ms + other.duration_ms,
            timed=self.timed + other.timed,
            retried=self.retried + other.retried,
            last_attempt=max(self.last_attempt, other.last_attempt),
        )


def _tally_aggregates(trials: str) -> dict:
    """Aggregate expressions counting the trials reached through the relation ``trials``
    (``"trials"`` from a Run, ``""`` on Trial itself)."""
    prefix = f"{trials}__" if trials else ""
    status = f"{prefix}status"
    pk = f"{trials}" if trials else "pk"
    aggregates = {
        "total": Count(pk),
        "passed": Count(pk, filter=Q(**{status: _STATUS.PASSED})),
        "failed": Count(pk, filter=Q(**{status: _STATUS.FAILED})),
        "timed_out": Count(pk, filter=Q(**{status: _STATUS.TIMED_OUT})),
        "errored": Count(pk, filter=Q(**{status: _STATUS.ERRORED})),
        "running": Count(pk, filter=Q(**{status: _STATUS.RUNNING})),
        "budget_exhausted": Count(pk, filter=Q(**{status: _STATUS.BUDGET_EXHAUSTED})),
        # No Coalesce: an empty sum reads as None and _tally counts it as 0, which spares a
        # converter per row on a 4,000-run grid.
        "tokens": Sum(F(f"{prefix}input_tokens") + F(f"{prefix}output_tokens")),
        "duration_ms": Sum(f"{prefix}duration_ms"),
        "timed": Count(f"{prefix}duration_ms"),
        "retried": Count(pk, filter=Q(**{f"{prefix}attempt__gt": 1})),
        "last_attempt": Max(f"{prefix}attempt"),
    }
    # Prefixed, so no alias shadows a Trial field that another aggregate reads.
    return {f"tally_{name}": expression for name, expression in aggregates.items()}


_TALLY_FIELDS = (
    "total",
    "passed",
    "failed",
    "timed_out",
    "errored",
    "running",
    "budget_exhausted",
    "tokens",
    "duration_ms",
    "timed",
    "retried",
    "last_attempt",
)


def _tally(row: Mapping[str, Any]) -> Tally:
    return Tally(**{name: int(row[f"tally_{name}"] or 0) for name in _TALLY_FIELDS})


@dataclass(frozen=True)
class GridCell:
    """One run of the grid: a case version under a variant."""

    run_id: int
    case_version_id: int
    variant_id: int
    tally: Tally


# The Run column that counts each Tally field (kept by the triggers of migration 0009), in
# Tally's field order.
RUN_COUNTS = {name: f"trials_{name}" for name in _TALLY_FIELDS}


def run_tally_sums() -> dict:
    """Aggregate expressions adding up the counts of Run rows, to a Tally (see
    ``tally_of_sums``): a column or a batch read from its runs, not from its trials."""
    return {
        f"tally_{name}": Max(column) if name == "last_attempt" else Sum(column)
        for name, column in RUN_COUNTS.items()
    }


def tally_of_sums(row: Mapping[str, Any]) -> Tally:
    """The Tally of a row aggregated with ``run_tally_sums``."""
    return _tally(row)


def run_cells(runs: QuerySet[Run]) -> list[GridCell]:
    """The tally of every run in ``runs``, in one query over the runs alone (each counts its
    trials)."""
    # Tuples, not dicts: a grid page reads 800 of these rows, and a dict per row cost more
    # than the row's query.
    rows = runs.order_by().values_list("id", "case_version_id", "variant_id", *RUN_COUNTS.values())
    return [
        GridCell(
            run_id=run_id,
            case_version_id=case_version_id,
            variant_id=variant_id,
            tally=Tally(*counts),
        )
        for run_id, case_version_id, variant_id, *counts in rows
    ]


def run_cell(batch: Batch, run_id: int) -> GridCell | None:
    """One cell of ``batch``, re-counted for a live update (one query)."""
    cells = run_cells(Run.objects.filter(batch=batch, pk=run_id))
    return cells[0] if cells else None


def runs_tally(runs: QuerySet[Run]) -> Tally:
    """The tally of any set of runs, from their counts, in one query."""
    return _tally(runs.order_by().aggregate(**run_tally_sums()))


def trials_tally(trials: QuerySet[Trial]) -> Tally:
    """The tally of any set of trials, in one query."""
    return _tally(trials.order_by().aggregate(**_tally_aggregates("")))


def changed_run_ids(batch: Batch, since: datetime) -> list[int]:
    """Runs of ``batch`` with a trial that started or finished at or after ``since`` (one
    query): what a page rendered at ``since`` may show stale."""
    return list(
        Trial.objects.filter(run__batch=batch)
        .filter(Q(started_at__gte=since) | Q(finished_at__gte=since))
        .order_by()
        .values_list("run_id", flat=True)
        .distinct()
    )


@dataclass
class GridRow:
    case_version: CaseVersion
    cells: list[GridCell | None]
    total: Tally

    @property
    def case(self) -> Case:
        return self.case_version.case


@dataclass
class GridColumn:
    variant: Variant
    total: Tally
    # What threatens this variant's comparison, by name: {"timed_out": 2, ...} (see below).
    warnings: dict[str, int] = field(default_factory=dict)


@dataclass
class BatchGrid:
    """The case x variant table of one batch, filtered and sorted, with its totals."""

    batch: Batch
    columns: list[GridColumn]
    rows: list[GridRow]
    total: Tally
    # What the filters can offer: every suite and tag of the batch, before filtering.
    suites: list[tuple[str, str]] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    case_count: int = 0


def batch_grid(
    batch: Batch,
    *,
    suite: str = "",
    tag: str = "",
    search: str = "",
    sort: str = "case",
) -> BatchGrid:
    """The grid of ``batch`` in four queries (case versions, variants, cell tallies, validity
    warnings). The warnings count the whole batch, whatever the filters show.

    ``suite`` is a suite slug, ``tag`` one case tag, ``search`` matches the case's slug or
    name; ``sort`` is ``case`` (suite then slug), ``rate`` (worst first), ``-rate`` (best
    first), or ``v<variant id>`` / ``-v<variant id>`` to sort by one column.
    """
    runs = Run.objects.filter(batch=batch)
    versions = list(
        CaseVersion.objects.filter(pk__in=runs.values("case_version_id"))
        .select_related("case__suite")
        # The definition and captured sources can be large and the grid shows neither.
        .defer("definition", "sources")
        # A rerun reruns the version shown; the row says when a newer one was recorded since.
        .annotate(latest_number=latest_version_number())
        .order_by("case__suite__slug", "case__slug")
    )
    variants = list(Variant.objects.filter(pk__in=runs.values("variant_id")).order_by("name", "pk"))
    cells = {(c.case_version_id, c.variant_id): c for c in run_cells(runs)}

    suites = sorted({(v.case.suite.slug, v.case.suite.name) for v in versions})
    tags = sorted({t for v in versions for t in (v.case.tags or []) if isinstance(t, str)})
    needle = search.strip().lower()
    shown = [
        v
        for v in versions
        if (not suite or v.case.suite.slug == suite)
        and (not tag or tag in (v.case.tags or []))
        and (not needle or needle in v.case.slug.lower() or needle in v.case.name.lower())
    ]

    rows = []
    for version in shown:
        row_cells = [cells.get((version.pk, variant.pk)) for variant in variants]
        rows.append(GridRow(version, row_cells, sum_tallies(c.tally for c in row_cells if c)))
    warnings = validity_warnings(batch)
    columns = [
        GridColumn(
            variant,
            sum_tallies(row.cells[i].tally for row in rows if row.cells[i]),  # type: ignore[union-attr]
            warnings.get(variant.pk, {}),
        )
        for i, variant in enumerate(variants)
    ]
    sort_rows(rows, sort, variants)
    return BatchGrid(
        batch=batch,
        columns=columns,
        rows=rows,
        total=sum_tallies(row.total for row in rows),
        suites=suites,
        tags=tags,
        case_count=len(versions),
    )


_tally_values = attrgetter(*_TALLY_FIELDS)


def sum_tallies(tallies: Iterable[Tally]) -> Tally:
    """The tallies added up, in one pass over their fields (a row's, a column's, the grid's)."""
    columns = list(zip(*(_tally_values(tally) for tally in tallies), strict=True))
    if not columns:
        return Tally()
    totals = {name: sum(column) for name, column in zip(_TALLY_FIELDS, columns, strict=True)}
    totals["last_attempt"] = max(columns[-1])  # the highest attempt, not a count
    return Tally(**totals)


def sort_rows(rows: list[GridRow], sort: str, variants: list[Variant]) -> None:
    """Sort ``rows`` in place by ``sort``: "rate" or "v<variant id>", "-" first for
    descending; any other sort keeps the suite-then-case order."""
    descending = sort.startswith("-")
    key = sort.lstrip("-")
    if key == "rate":
        rates = [row.total.pass_rate for row in rows]
    elif key.startswith("v") and key[1:].isdigit():
        column = next((i for i, v in enumerate(variants) if v.pk == int(key[1:])), None)
        if column is None:
            return
        rates = [cell.tally.pass_rate if (cell := row.cells[column]) else None for row in rows]
    else:
        return
    # Rows with nothing finished go last in either direction: they say nothing yet. The sort
    # is stable, so equal rates keep the suite-then-case order.
    order = sorted(
        range(len(rows)),
        key=lambda i: (rates[i] is None, -(rates[i] or 0.0) if descending else (rates[i] or 0.0)),
    )
    rows[:] = [rows[i] for i in order]


def row_tally(batch_id: int, case_version_id: int) -> Tally:
    """A row's total, re-counted from its runs for a live update (one query)."""
    return runs_tally(Run.objects.filter(batch_id=batch_id, case_version_id=case_version_id))


def column_tally(batch_id: int, variant_id: int) -> Tally:
    """A column's total, re-counted from its runs for a live update (one query)."""
    return runs_tally(Run.objects.filter(batch_id=batch_id, variant_id=variant_id))


def version_variant_tallies(case: Case) -> dict[tuple[int, int], Tally]:
    """``{(case version id, variant id): Tally}`` over every batch that ran the case, in one
    query: the case history's pass rate per version and variant."""
    rows = (
        Run.objects.filter(case_version__case=case)
        .order_by()
        .values("case_version_id", "variant_id")
        .annotate(**run_tally_sums())
    )
    return {(row["case_version_id"], row["variant_id"]): _tally(row) for row in rows}


# --- validity warnings ---------------------------------------------------------------------------


def validity_warning_names(
    *,
    status: str,
    conversation_outcome: str,
    stop_cause: str,
    responder_cause: str,
    plan_state: str,
) -> list[str]:
    """The validity warnings one trial raises: what makes its variant's pass rate a weaker
    measure of the agent (a timeout, broken infrastructure, a conversation cut short, a plan
    never left). An agent that did not ask when a script expected it is a result about the
    agent, not a threat to the comparison: no warning. The names are those of benchmark.json.
    """
    names = []
    if status == _STATUS.TIMED_OUT:
        names.append("timed_out")
    elif status == _STATUS.ERRORED:
        names.append("errored")
    if conversation_outcome == "stopped" or plan_state == "planning":
        if stop_cause == "responder_cannot_answer":
            names.append(f"responder_cannot_answer:{responder_cause or 'unknown'}")
        elif stop_cause == "simulated_user_failed":
            names.append(f"simulated_user_failed:{responder_cause or 'unknown'}")
        elif stop_cause == "max_turns_reached":
            names.append("max_turns_reached")
    if plan_state == "planning":
        names.append("never_left_planning")
    return names


def validity_warnings(
    batch: Batch,
    variant_id: int | None = None,
    *,
    column_totals: Mapping[int, Tally] | None = None,
) -> dict[int, dict[str, int]]:
    """``{variant id: {warning name: trials}}`` for ``batch`` (one variant when given), in two
    queries: the timeouts and errors its runs count, and the conversations cut short read from
    the few runs that count one; one query when the caller has the batch's ``column_totals``
    (by variant id) already. The most frequent come first (then by name); a variant with
    nothing to warn about is absent."""
    runs = Run.objects.filter(batch=batch)
    if variant_id is not None:
        runs = runs.filter(variant_id=variant_id)
    statuses: Iterable[tuple[int, int, int]]
    if column_totals is None:
        statuses = (
            runs.order_by()
            .values("variant_id")
            .annotate(timed_out=Sum("trials_timed_out"), errored=Sum("trials_errored"))
            .values_list("variant_id", "timed_out", "errored")
        )
    else:
        statuses = [(v, t.timed_out, t.errored) for v, t in column_totals.items()]
    counts: dict[int, dict[str, int]] = {}
    for variant, timed_out, errored in statuses:
        for name, trials in (("timed_out", timed_out), ("errored", errored)):
            if trials:
                counts.setdefault(variant, {})[name] = trials
    groups = (
        Trial.objects.filter(run__in=runs.filter(trials_stopped_or_planning__gt=0))
        .filter(Q(conversation_outcome="stopped") | Q(plan_state="planning"))
        .order_by()
        .values(
            "run__variant_id",
            "conversation_outcome",
            "stop_cause",
            "responder_cause",
            "plan_state",
        )
        .annotate(trials=Count("id"))
    )
    for group in groups:
        bucket = counts.setdefault(group["run__variant_id"], {})
        # The status's own warnings were counted above, from the runs.
        for name in validity_warning_names(
            status="",
            conversation_outcome=group["conversation_outcome"],
            stop_cause=group["stop_cause"],
            responder_cause=group["responder_cause"],
            plan_state=group["plan_state"],
        ):
            bucket[name] = bucket.get(name, 0) + group["trials"]
    return {
        variant: dict(sorted(bucket.items(), key=lambda item: (-item[1], item[0])))
        for variant, bucket in counts.items()
    }


def latest_version_number() -> Subquery:
    """The newest version number of the row's case, as a subquery (no extra query)."""
    newest = CaseVersion.objects.filter(case_id=OuterRef("case_id")).order_by("-number")
    return Subquery(newest.values("number")[:1])
