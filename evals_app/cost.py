"""What trials cost in US dollars: per trial, per cell (run), per batch, and per passed trial.

A trial's cost is decided once, when it ends, and stored on ``Trial.cost_usd``:

1. the variant's ``prices`` option ({"input_per_mtok", "output_per_mtok", and optionally
   "cache_read_per_mtok", "cache_write_per_mtok"}): the user named the price, so it wins, as
   it does for the ``cost`` assertion (runner.trial.execute.trial_cost);
2. else the cost the harness reported: Claude Code's ``total_cost_usd``, OpenCode's per-step
   ``cost``, a command agent's ``costUsd`` on its Usage lines;
3. else usage x the settings' price table ``PROCTOR_PRICES`` for the variant's model;
4. else unknown (null), shown as "—", never as $0.

The summaries here cost one query each, whatever the batch's size.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Count, Q, QuerySet, Sum

from evals_app.models import Batch, Run, Trial, Variant

# Price keys and the usage counts they multiply.
PRICED_USAGE = {
    "input_per_mtok": "input_tokens",
    "output_per_mtok": "output_tokens",
    "cache_read_per_mtok": "cache_read_tokens",
    "cache_write_per_mtok": "cache_write_tokens",
}


def usage_cost(usage: Mapping[str, Any], prices: Mapping[str, Any]) -> float:
    """USD for ``usage`` (token counts) at ``prices`` (USD per million tokens per kind)."""
    total = 0.0
    for price_key, usage_key in PRICED_USAGE.items():
        price = prices.get(price_key)
        if isinstance(price, int | float) and not isinstance(price, bool):
            total += int(usage.get(usage_key) or 0) * float(price)
    return total / 1_000_000


def variant_prices(variant: Variant) -> dict[str, Any] | None:
    """The variant's own ``prices`` option, None when it sets none."""
    prices = ((variant.spec or {}).get("options") or {}).get("prices")
    return prices if isinstance(prices, dict) else None


def table_prices(model: str) -> dict[str, float] | None:
    """The settings' ``PROCTOR_PRICES`` entry for ``model``, None when it has none."""
    table: dict[str, dict[str, float]] = getattr(settings, "PROCTOR_PRICES", {}) or {}
    return table.get(model) if model else None


def trial_cost_usd(
    variant: Variant, usage: Mapping[str, Any], reported: float | None
) -> float | None:
    """A trial's cost by the rule of this module's docstring: the variant's prices, else the
    harness-reported cost, else the price table for the variant's model, else None."""
    own = variant_prices(variant)
    if own is not None:
        return usage_cost(usage, own)
    if reported is not None:
        return float(reported)
    table = table_prices(variant.model)
    if table is not None:
        return usage_cost(usage, table)
    return None


@dataclass(frozen=True)
class CostSummary:
    """The cost of a set of trials. ``costed`` counts the trials whose cost is known; the
    totals cover those only, so a partly costed set says so instead of looking cheap."""

    trials: int = 0
    passed: int = 0
    costed: int = 0
    total_usd: float | None = None

    @property
    def per_trial_usd(self) -> float | None:
        """Mean cost of a costed trial."""
        return self.total_usd / self.costed if self.total_usd is not None and self.costed else None

    @property
    def per_passed_trial_usd(self) -> float | None:
        """What one pass cost: everything spent (failures included) over the passes. None with
        no pass or no known cost."""
        if self.total_usd is None or not self.passed:
            return None
        return self.total_usd / self.passed

    @property
    def complete(self) -> bool:
        """Every trial's cost is known."""
        return self.costed == self.trials

    def to_dict(self) -> dict[str, Any]:
        return {
            "trials": self.trials,
            "passed": self.passed,
            "costed_trials": self.costed,
            "total_usd": _round(self.total_usd),
            "per_trial_usd": _round(self.per_trial_usd),
            "per_passed_trial_usd": _round(self.per_passed_trial_usd),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _aggregates(prefix: str = "") -> dict:
    return {
        "cost_trials": Count(f"{prefix}id" if prefix else "id"),
        "cost_passed": Count(
            f"{prefix}id" if prefix else "id",
            filter=Q(**{f"{prefix}status": Trial.Status.PASSED}),
        ),
        "cost_costed": Count(f"{prefix}cost_usd"),
        "cost_total": Sum(f"{prefix}cost_usd"),
    }


def _summary(row: Mapping[str, Any]) -> CostSummary:
    return CostSummary(
        trials=row["cost_trials"] or 0,
        passed=row["cost_passed"] or 0,
        costed=row["cost_costed"] or 0,
        total_usd=row["cost_total"] if row["cost_costed"] else None,
    )


def cost_aggregates() -> dict:
    """The aggregate expressions of a CostSummary over Trial rows, to add to another grouped
    query (the grid's column totals read both in one scan)."""
    return _aggregates()


def cost_summary(row: Mapping[str, Any]) -> CostSummary:
    """The CostSummary of a row aggregated with ``cost_aggregates``."""
    return _summary(row)


def combined_cost(summaries: Iterable[CostSummary]) -> CostSummary:
    """The cost of disjoint sets of trials taken together (a batch from its variants)."""
    trials = passed = costed = 0
    total: float | None = None
    for summary in summaries:
        trials, passed, costed = (
            trials + summary.trials,
            passed + summary.passed,
            costed + summary.costed,
        )
        if summary.total_usd is not None:
            total = (total or 0.0) + summary.total_usd
    return CostSummary(trials=trials, passed=passed, costed=costed, total_usd=total)


def trials_cost(trials: QuerySet[Trial]) -> CostSummary:
    """The cost of any set of trials (one query)."""
    return _summary(trials.order_by().aggregate(**_aggregates()))


def batch_cost(batch: Batch) -> CostSummary:
    """The cost of every trial of ``batch`` (one query)."""
    return trials_cost(Trial.objects.filter(run__batch=batch))


def run_costs(batch: Batch) -> dict[int, CostSummary]:
    """``{run id: CostSummary}``: the cost of each grid cell of ``batch`` (one query)."""
    rows = (
        Trial.objects.filter(run__batch=batch).order_by().values("run_id").annotate(**_aggregates())
    )
    return {row["run_id"]: _summary(row) for row in rows}


def run_cost_sums() -> dict:
    """The aggregate expressions of a CostSummary over Run rows, added up from the counts each
    run keeps of its trials (migration 0009), to read with ``cost_summary``."""
    return {
        "cost_trials": Sum("trials_total"),
        "cost_passed": Sum("trials_passed"),
        "cost_costed": Sum("trials_costed"),
        "cost_total": Sum("trials_cost_usd"),
    }


def variant_costs(batch: Batch) -> dict[int, CostSummary]:
    """``{variant id: CostSummary}``: the cost of each column of ``batch`` (one query over its
    runs)."""
    rows = (
        Run.objects.filter(batch=batch).order_by().values("variant_id").annotate(**run_cost_sums())
    )
    return {row["variant_id"]: _summary(row) for row in rows}


def summarize_costs(costs: list[float | None], passed: int) -> CostSummary:
    """A CostSummary of trial costs already in memory (None: unknown), ``passed`` of them
    passed."""
    known = [c for c in costs if c is not None]
    return CostSummary(
        trials=len(costs), passed=passed, costed=len(known), total_usd=sum(known) if known else None
    )


def format_usd(value: float | None) -> str:
    """A cost for people: "$0.0123", "$1.24", or "—" when unknown."""
    if value is None:
        return "—"
    return f"${value:.4f}" if value < 1 else f"${value:.2f}"
