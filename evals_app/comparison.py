"""Compare two batches: is B better than A, where did it regress, and can the difference be
trusted.

Cells are matched by name (suite, case slug, variant name), so a new case version or a changed
agent still lines up with what it replaced; the comparability guard then says so by name. Per
cell: each side's pass rate (passed over finished trials) with its Wilson interval, and the
difference B - A with Newcombe's hybrid score interval; a cell is a *significant* change when
that interval excludes 0. Per variant, over the cases both sides ran: the exact McNemar test on
per-case outcomes, where a case passes when a strict majority of its finished trials passed
(2 of 3 passes, 1 of 2 fails), so a case counts once whatever its trial count.

Reading a batch merged (the default) reads it with its reruns (evals_app.merged). The cost of a
comparison is a fixed number of queries (about ten), whatever the size of the batches.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from evals_app.cost import CostSummary, summarize_costs
from evals_app.estimators import (
    mcnemar_exact,
    mean_pass_k_curves,
    pass_k_curves,
    rate_difference_interval,
    wilson_interval,
)
from evals_app.merged import CellKey, TrialRow, batch_cells, family_ids
from evals_app.models import Batch, Consultation, Event, Organization, Trial
from evals_app.pass_rates import Tally
from proctor.agent_events import CLI_VERSION_NOTE

# A variant's change is significant below this McNemar p-value (two-sided).
ALPHA = 0.05

_S = Trial.Status


def tally_of(rows: Iterable[TrialRow]) -> Tally:
    """The Tally (evals_app.pass_rates) of trials already in memory."""
    counts = dict.fromkeys(
        ("total", "passed", "failed", "timed_out", "errored", "running", "budget_exhausted"), 0
    )
    tokens = 0
    for row in rows:
        counts["total"] += 1
        if row.status in counts:
            counts[row.status] += 1
        tokens += row.input_tokens + row.output_tokens
    return Tally(tokens=tokens, **counts)


def case_passes(tally: Tally) -> bool | None:
    """A case's outcome in one batch: passed when a strict majority of its finished trials
    passed; None when none finished."""
    if not tally.finished:
        return None
    return tally.passed * 2 > tally.finished


@dataclass(frozen=True)
class CellSide:
    """One side of a compared cell."""

    versions: list[int]
    tally: Tally
    cost: CostSummary
    trial_ids: list[int]

    @property
    def rate(self) -> float | None:
        return self.tally.pass_rate

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.tally.passed, self.tally.finished)

    @property
    def case_passed(self) -> bool | None:
        return case_passes(self.tally)

    @property
    def pass_k(self) -> dict[str, dict[int, float]]:
        """pass@k and pass^k of the cell, k = 1..finished (evals_app.estimators)."""
        return pass_k_curves(self.tally.finished, self.tally.passed)

    def to_dict(self) -> dict[str, Any]:
        t = self.tally
        curves = self.pass_k
        return {
            "case_versions": self.versions,
            "trials": t.total,
            "finished": t.finished,
            "passed": t.passed,
            "failed": t.failed,
            "timed_out": t.timed_out,
            "errored": t.errored,
            "pass_rate": _r(self.rate),
            "interval": [_r(x) for x in self.interval],
            "case_passed": self.case_passed,
            "pass_at_k": _curve(curves["pass@k"]),
            "pass_hat_k": _curve(curves["pass^k"]),
            "cost": self.cost.to_dict(),
            "trial_ids": self.trial_ids,
        }


@dataclass(frozen=True)
class CellComparison:
    """One case x variant, side by side."""

    suite: str
    case: str
    case_name: str
    variant: str
    a: CellSide | None
    b: CellSide | None
    delta: float | None = None
    delta_interval: tuple[float, float] | None = None

    @property
    def regression(self) -> bool:
        return self.delta is not None and self.delta < 0

    @property
    def improvement(self) -> bool:
        return self.delta is not None and self.delta > 0

    @property
    def significant(self) -> bool:
        """The difference's interval excludes 0."""
        if self.delta_interval is None:
            return False
        low, high = self.delta_interval
        return low > 0 or high < 0

    @property
    def change(self) -> str:
        """regression | improvement | same | only_in_a | only_in_b | pending"""
        if self.a is None:
            return "only_in_b"
        if self.b is None:
            return "only_in_a"
        if self.delta is None:
            return "pending"
        return "regression" if self.regression else "improvement" if self.improvement else "same"

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "case": self.case,
            "case_name": self.case_name,
            "variant": self.variant,
            "a": self.a.to_dict() if self.a else None,
            "b": self.b.to_dict() if self.b else None,
            "delta": _r(self.delta),
            "delta_interval": [_r(x) for x in self.delta_interval] if self.delta_interval else None,
            "change": self.change,
            "regression": self.regression,
            "improvement": self.improvement,
            "significant": self.significant,
        }


@dataclass(frozen=True)
class VariantComparison:
    """One variant present on both sides, over the cases both ran to an outcome."""

    variant: str
    shared_cases: int
    passing_a: int
    passing_b: int
    only_a: list[str]  # "suite/case" passing in A only (lost)
    only_b: list[str]  # passing in B only (gained)
    p_value: float
    tally_a: Tally
    tally_b: Tally
    cost_a: CostSummary
    cost_b: CostSummary
    # pass@k and pass^k of the variant on each side: the mean over its cells (as on the grid).
    pass_k_a: dict[str, dict[int, float]] = field(default_factory=dict)
    pass_k_b: dict[str, dict[int, float]] = field(default_factory=dict)

    @property
    def rate_a(self) -> float | None:
        return self.tally_a.pass_rate

    @property
    def rate_b(self) -> float | None:
        return self.tally_b.pass_rate

    @property
    def interval_a(self) -> tuple[float, float]:
        return wilson_interval(self.tally_a.passed, self.tally_a.finished)

    @property
    def interval_b(self) -> tuple[float, float]:
        return wilson_interval(self.tally_b.passed, self.tally_b.finished)

    @property
    def significant(self) -> bool:
        return self.p_value < ALPHA

    @property
    def significant_regression(self) -> bool:
        return self.significant and len(self.only_a) > len(self.only_b)

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "shared_cases": self.shared_cases,
            "cases_passing_a": self.passing_a,
            "cases_passing_b": self.passing_b,
            "only_a": self.only_a,
            "only_b": self.only_b,
            "test": "exact McNemar (two-sided) on per-case majority outcomes",
            "p_value": _r(self.p_value),
            "significant": self.significant,
            "a": {
                "pass_rate": _r(self.rate_a),
                "interval": [_r(x) for x in self.interval_a],
                "trials": self.tally_a.total,
                "cost": self.cost_a.to_dict(),
                "pass_at_k": _curve(self.pass_k_a.get("pass@k", {})),
                "pass_hat_k": _curve(self.pass_k_a.get("pass^k", {})),
            },
            "b": {
                "pass_rate": _r(self.rate_b),
                "interval": [_r(x) for x in self.interval_b],
                "trials": self.tally_b.total,
                "cost": self.cost_b.to_dict(),
                "pass_at_k": _curve(self.pass_k_b.get("pass@k", {})),
                "pass_hat_k": _curve(self.pass_k_b.get("pass^k", {})),
            },
        }


@dataclass(frozen=True)
class ComparabilityWarning:
    """Something that differs between the sides besides the agents' results, by name."""

    kind: str  # case_version | agent_digest | model | harness | cli_version | proctor_version
    # | judge_model | responder_model | sandbox | trial_count
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}


@dataclass
class Comparison:
    a: Batch
    b: Batch
    merged: bool
    cells: list[CellComparison]
    variants: list[VariantComparison]
    warnings: list[ComparabilityWarning]
    cost_a: CostSummary = field(default_factory=CostSummary)
    cost_b: CostSummary = field(default_factory=CostSummary)

    @property
    def regressions(self) -> list[CellComparison]:
        return [c for c in self.cells if c.regression]

    @property
    def improvements(self) -> list[CellComparison]:
        return [c for c in self.cells if c.improvement]

    @property
    def significant_regressions(self) -> list[CellComparison]:
        return [c for c in self.cells if c.regression and c.significant]

    @property
    def has_significant_regression(self) -> bool:
        """A cell whose drop is significant, or a variant that lost significantly more cases
        than it gained: what ``--fail-on-regression`` fails on."""
        return bool(self.significant_regressions) or any(
            v.significant_regression for v in self.variants
        )

    @property
    def cases_passing(self) -> tuple[int, int]:
        """Cells (case x variant) both sides ran that pass by majority, in A and in B."""
        shared = [c for c in self.cells if c.a and c.b and c.delta is not None]
        return (
            sum(1 for c in shared if c.a and c.a.case_passed),
            sum(1 for c in shared if c.b and c.b.case_passed),
        )

    @property
    def headline(self) -> str:
        """One sentence: "B passes 12 more cases than A; 3 regressions, 1 significant"."""
        passing_a, passing_b = self.cases_passing
        diff = passing_b - passing_a
        if diff > 0:
            first = f"B passes {diff} more case{'s' if diff != 1 else ''} than A"
        elif diff < 0:
            first = f"B passes {-diff} fewer case{'s' if diff != -1 else ''} than A"
        else:
            first = "B passes as many cases as A"
        regressions, improvements = len(self.regressions), len(self.improvements)
        parts = [
            f"{regressions} regression{'s' if regressions != 1 else ''}, "
            f"{len(self.significant_regressions)} significant"
        ]
        if improvements:
            significant = sum(1 for c in self.improvements if c.significant)
            parts.append(
                f"{improvements} improvement{'s' if improvements != 1 else ''}, "
                f"{significant} significant"
            )
        return f"{first}; {'; '.join(parts)}"

    def to_dict(self) -> dict[str, Any]:
        """The comparison as JSON (``proctor compare --json`` and the API)."""
        return {
            "a": _batch_dict(self.a, self.cost_a),
            "b": _batch_dict(self.b, self.cost_b),
            "merged": self.merged,
            "headline": self.headline,
            "cases_passing": dict(zip(("a", "b"), self.cases_passing, strict=True)),
            "regressions": len(self.regressions),
            "significant_regressions": len(self.significant_regressions),
            "improvements": len(self.improvements),
            "has_significant_regression": self.has_significant_regression,
            "method": {
                "rate_interval": "Wilson score, 95%",
                "difference_interval": "Newcombe hybrid score (method 10), 95%",
                "paired_test": "exact McNemar, two-sided, on per-case majority outcomes",
                "pass_k": "unbiased pass@k and pass^k per cell; per variant the mean over its "
                "cells, for k up to the smallest n",
                "alpha": ALPHA,
            },
            "warnings": [w.to_dict() for w in self.warnings],
            "variants": [v.to_dict() for v in self.variants],
            "cells": [c.to_dict() for c in self.cells],
        }


def _batch_dict(batch: Batch, cost: CostSummary) -> dict[str, Any]:
    return {
        "id": batch.pk,
        "label": batch.label,
        "created_at": batch.created_at.isoformat(),
        "is_baseline": batch.is_baseline,
        "cost": cost.to_dict(),
    }


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _curve(values: dict[int, float]) -> dict[str, float | None]:
    """pass@k or pass^k as JSON: {"1": 0.6667, "2": 1.0, ...}."""
    return {str(k): _r(v) for k, v in values.items()}


# --- building a comparison ---------------------------------------------------------------------


def compare_batches(
    a: Batch,
    b: Batch,
    *,
    merged: bool = True,
    suites: Collection[str] | None = None,
    mode: str = "latest",
) -> Comparison:
    """Compare batch ``b`` against batch ``a`` (the reference): cells sorted regressions first
    (significant ones first, then by the size of the drop), then improvements, unchanged cells,
    and cells only one side ran. ``merged`` reads each batch with its reruns, keeping the
    latest trials per cell (``mode="latest"``) or all of them (``mode="all"``); ``suites``
    restricts the comparison to those suite slugs."""
    cells_a = _only_suites(batch_cells(a, merged=merged, mode=mode), suites)
    cells_b = _only_suites(batch_cells(b, merged=merged, mode=mode), suites)
    cells = [_cell(key, cells_a.get(key), cells_b.get(key)) for key in sorted(cells_a | cells_b)]
    cells.sort(key=_cell_order)
    rows_a = [r for rows in cells_a.values() for r in rows]
    rows_b = [r for rows in cells_b.values() for r in rows]
    return Comparison(
        a=a,
        b=b,
        merged=merged,
        cells=cells,
        variants=_variants(cells_a, cells_b),
        warnings=_warnings(a, b, cells_a, cells_b, merged=merged),
        cost_a=_cost(rows_a),
        cost_b=_cost(rows_b),
    )


def suite_baseline(organization: Organization, suite_slug: str) -> Batch | None:
    """The batch marked as the baseline of ``suite_slug`` in ``organization`` (one query)."""
    return (
        Batch.objects.filter(
            organization=organization,
            is_baseline=True,
            runs__case_version__case__suite__slug=suite_slug,
        )
        .order_by("-created_at", "-id")
        .distinct()
        .first()
    )


def baseline_comparisons(
    b: Batch, *, merged: bool = True, mode: str = "latest"
) -> tuple[list[Comparison], list[str]]:
    """Compare ``b`` with the baseline of each suite it ran: one Comparison per baseline
    batch, restricted to the suites it is the baseline of, and the slugs of the suites that
    have no baseline. A suite whose baseline is ``b`` itself is compared with nothing."""
    groups: dict[int, tuple[Batch, list[str]]] = {}
    missing = []
    for slug in b.suite_slugs():
        baseline = suite_baseline(b.organization, slug)
        if baseline is None:
            missing.append(slug)
        elif baseline.pk != b.pk:
            groups.setdefault(baseline.pk, (baseline, []))[1].append(slug)
    comparisons = [
        compare_batches(baseline, b, merged=merged, suites=slugs, mode=mode)
        for baseline, slugs in groups.values()
    ]
    return comparisons, missing


def _only_suites(
    cells: dict[CellKey, list[TrialRow]], suites: Collection[str] | None
) -> dict[CellKey, list[TrialRow]]:
    if suites is None:
        return cells
    return {key: rows for key, rows in cells.items() if key[0] in suites}


def _cost(rows: list[TrialRow]) -> CostSummary:
    return summarize_costs([r.cost_usd for r in rows], sum(1 for r in rows if r.passed))


def _side(rows: list[TrialRow] | None) -> CellSide | None:
    if not rows:
        return None
    return CellSide(
        versions=sorted({r.case_version for r in rows}),
        tally=tally_of(rows),
        cost=_cost(rows),
        trial_ids=[r.id for r in rows],
    )


def _cell(
    key: CellKey, rows_a: list[TrialRow] | None, rows_b: list[TrialRow] | None
) -> CellComparison:
    suite, case, variant = key
    sample = next(iter(rows_b or rows_a or []), None)
    case_name = sample.case_name if sample else case
    a, b = _side(rows_a), _side(rows_b)
    delta = interval = None
    if a and b and a.tally.finished and b.tally.finished:
        delta = b.tally.passed / b.tally.finished - a.tally.passed / a.tally.finished
        interval = rate_difference_interval(
            a.tally.passed, a.tally.finished, b.tally.passed, b.tally.finished
        )
    return CellComparison(suite, case, case_name, variant, a, b, delta, interval)


def _cell_order(cell: CellComparison) -> tuple:
    change = cell.change
    rank = {"regression": 0, "improvement": 1, "same": 2, "pending": 3}.get(change, 4)
    size = -abs(cell.delta or 0.0)
    return (rank, not cell.significant, size, cell.suite, cell.case, cell.variant)


def _variants(
    cells_a: dict[CellKey, list[TrialRow]], cells_b: dict[CellKey, list[TrialRow]]
) -> list[VariantComparison]:
    names = sorted({k[2] for k in cells_a} & {k[2] for k in cells_b})
    result = []
    for name in names:
        keys = sorted(k for k in cells_a.keys() & cells_b.keys() if k[2] == name)
        outcomes = []
        for key in keys:
            pa, pb = case_passes(tally_of(cells_a[key])), case_passes(tally_of(cells_b[key]))
            if pa is not None and pb is not None:
                outcomes.append((f"{key[0]}/{key[1]}", pa, pb))
        only_a = [case for case, pa, pb in outcomes if pa and not pb]
        only_b = [case for case, pa, pb in outcomes if pb and not pa]
        rows_a = [r for k, rows in cells_a.items() if k[2] == name for r in rows]
        rows_b = [r for k, rows in cells_b.items() if k[2] == name for r in rows]
        result.append(
            VariantComparison(
                variant=name,
                shared_cases=len(outcomes),
                passing_a=sum(1 for _, pa, _ in outcomes if pa),
                passing_b=sum(1 for _, _, pb in outcomes if pb),
                only_a=only_a,
                only_b=only_b,
                p_value=mcnemar_exact(len(only_a), len(only_b)),
                tally_a=tally_of(rows_a),
                tally_b=tally_of(rows_b),
                cost_a=_cost(rows_a),
                cost_b=_cost(rows_b),
                pass_k_a=_variant_pass_k(cells_a, name),
                pass_k_b=_variant_pass_k(cells_b, name),
            )
        )
    return result


def _variant_pass_k(cells: dict[CellKey, list[TrialRow]], name: str) -> dict[str, dict[int, float]]:
    """pass@k and pass^k of variant ``name``: the mean over its cells of each cell's estimate
    from its finished trials, as the grid computes it."""
    counts = []
    for key, rows in cells.items():
        if key[2] == name:
            tally = tally_of(rows)
            counts.append((tally.finished, tally.passed))
    return mean_pass_k_curves(counts)


# --- the comparability guard ---------------------------------------------------------------------

# How many names a warning lists before "and N more".
SHOWN = 3


def _listed(items: list[str]) -> str:
    shown = "; ".join(items[:SHOWN])
    return shown + (f"; and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def _values(rows: Iterable[TrialRow], attribute: str) -> list[str]:
    return sorted({str(getattr(r, attribute)) for r in rows})


def _warnings(
    a: Batch,
    b: Batch,
    cells_a: dict[CellKey, list[TrialRow]],
    cells_b: dict[CellKey, list[TrialRow]],
    *,
    merged: bool,
) -> list[ComparabilityWarning]:
    warnings: list[ComparabilityWarning] = []
    shared = sorted(cells_a.keys() & cells_b.keys())

    def differ(kind: str, items: list[str], what: str) -> None:
        if items:
            warnings.append(ComparabilityWarning(kind, f"{what} differs: {_listed(items)}"))

    # Per case: its version. The shared cells grouped by case first: looking each case's up
    # among all of them took seconds at 500 cases of 8 variants.
    keys_by_case: dict[tuple[str, str], list[CellKey]] = {}
    for key in shared:
        keys_by_case.setdefault(key[:2], []).append(key)
    versions = []
    for (suite, case), keys in sorted(keys_by_case.items()):
        in_a = {r.case_version for k in keys for r in cells_a[k]}
        in_b = {r.case_version for k in keys for r in cells_b[k]}
        if in_a != in_b:
            versions.append(f"{suite}/{case} is {_v(in_a)} in A, {_v(in_b)} in B")
    differ("case_version", versions, "case version")

    # Per variant: what the agent was and where it ran.
    by_variant_a: dict[str, list[TrialRow]] = {}
    by_variant_b: dict[str, list[TrialRow]] = {}
    for key in shared:
        by_variant_a.setdefault(key[2], []).extend(cells_a[key])
        by_variant_b.setdefault(key[2], []).extend(cells_b[key])
    for kind, attribute, what in (
        ("agent_digest", "profile_digest", "agent digest (profile)"),
        ("model", "model", "agent model"),
        ("harness", "harness", "harness"),
        ("sandbox", "sandbox", "sandbox"),
    ):
        show = _digest if kind == "agent_digest" else str
        spec_items: list[str] = []
        for name in sorted(by_variant_a):
            va, vb = _values(by_variant_a[name], attribute), _values(by_variant_b[name], attribute)
            if va != vb:
                spec_items.append(
                    f"{name} ran {', '.join(map(show, va))} in A, {', '.join(map(show, vb))} in B"
                )
        differ(kind, spec_items, what)

    # Per variant: the agent CLI's version, as the harness found it in the sandbox.
    cli_a = _cli_versions(a, merged=merged)
    cli_b = _cli_versions(b, merged=merged)
    cli_items: list[str] = []
    for name in sorted(by_variant_a):
        ca, cb = cli_a.get(name, set()), cli_b.get(name, set())
        if ca and cb and ca != cb:
            cli_items.append(
                f"{name} ran {', '.join(sorted(ca))} in A, {', '.join(sorted(cb))} in B"
            )
    differ("cli_version", cli_items, "agent CLI version")

    # Per batch: the Proctor (harness code) version and the models that judged and responded.
    pa, pb = (a.options or {}).get("proctor_version"), (b.options or {}).get("proctor_version")
    if pa and pb and pa != pb:
        differ("proctor_version", [f"A ran Proctor {pa}, B ran {pb}"], "harness (Proctor) version")
    consulted_a, consulted_b = _consulted(a, merged=merged), _consulted(b, merged=merged)
    for kind, option, what in (
        (Consultation.Kind.JUDGE, "judge_model", "judge model"),
        (Consultation.Kind.RESPONDER, "responder_model", "responder model"),
    ):
        ma = consulted_a.get(kind) or _option_set(a, option)
        mb = consulted_b.get(kind) or _option_set(b, option)
        if ma and mb and ma != mb:
            differ(
                f"{option}",
                [f"A used {', '.join(sorted(ma))}, B used {', '.join(sorted(mb))}"],
                what,
            )

    # Per cell: how many trials it ran.
    counts = [
        f"{k[0]}/{k[1]} × {k[2]} ran {len(cells_a[k])} in A, {len(cells_b[k])} in B"
        for k in shared
        if len(cells_a[k]) != len(cells_b[k])
    ]
    differ("trial_count", counts, "trial count")

    only_a = sorted(cells_a.keys() - cells_b.keys())
    only_b = sorted(cells_b.keys() - cells_a.keys())
    if only_a or only_b:
        parts = []
        if only_a:
            parts.append(f"{len(only_a)} only in A ({_listed([_key(k) for k in only_a])})")
        if only_b:
            parts.append(f"{len(only_b)} only in B ({_listed([_key(k) for k in only_b])})")
        warnings.append(
            ComparabilityWarning("cells", f"not every cell ran on both sides: {'; '.join(parts)}")
        )
    return warnings


def _key(key: CellKey) -> str:
    return f"{key[0]}/{key[1]} × {key[2]}"


def _v(numbers: set[int]) -> str:
    return ", ".join(f"v{n}" for n in sorted(numbers))


def _digest(value: str) -> str:
    return value[:12] if value else "no profile"


def _option_set(batch: Batch, option: str) -> set[str]:
    value = (batch.options or {}).get(option)
    return {value} if value else set()


def _consulted(batch: Batch, *, merged: bool) -> dict[str, set[str]]:
    """{consultation kind: models} the batch's judges and responders used (one query)."""
    ids = family_ids(batch) if merged else [batch.pk]
    found: dict[str, set[str]] = {}
    rows = (
        Consultation.objects.filter(trial__run__batch_id__in=ids)
        .exclude(model="")
        .order_by()
        .values_list("kind", "model")
        .distinct()
    )
    for kind, model in rows:
        found.setdefault(kind, set()).add(model)
    return found


def _cli_versions(batch: Batch, *, merged: bool) -> dict[str, set[str]]:
    """{variant name: agent CLI versions} its trials logged (one query over Log events)."""
    ids = family_ids(batch) if merged else [batch.pk]
    rows = (
        Event.objects.filter(
            trial__run__batch_id__in=ids,
            kind=Event.Kind.LOG,
            data__text__startswith=CLI_VERSION_NOTE,
        )
        .order_by()
        .values_list("trial__run__variant__name", "data__text")
        .distinct()
    )
    found: dict[str, set[str]] = {}
    for name, text in rows:
        found.setdefault(name, set()).add(str(text)[len(CLI_VERSION_NOTE) :].strip())
    return found
