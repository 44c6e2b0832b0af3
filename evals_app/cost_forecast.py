"""What a batch will cost, forecast from history before it starts (issue 32).

Per variant (by name, in the organization): the median cost of its most recent costed trials
(HISTORY_TRIALS at most) times the trials to run, with the range from the cheapest to the
dearest of those trials. A variant none of whose trials has a known cost has no forecast, and
says so rather than reading as $0. `proctor eval` prints it before a batch starts, and the
batch page shows it beside its rerun buttons.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from statistics import median
from typing import Any

from django.db.models import F, Sum, Window
from django.db.models.functions import RowNumber

from evals_app.cost import format_usd
from evals_app.models import Batch, Organization, Run, Trial

# How many of a variant's latest costed trials its forecast reads.
HISTORY_TRIALS = 20


@dataclass(frozen=True)
class VariantForecast:
    """One variant's share of a forecast: ``trials`` to run at the cost of ``history`` past
    trials (their median, cheapest and dearest per trial), None without history."""

    variant: str
    trials: int
    history: int = 0
    median_usd: float | None = None
    low_usd: float | None = None
    high_usd: float | None = None

    @property
    def total_usd(self) -> float | None:
        return None if self.median_usd is None else self.median_usd * self.trials

    @property
    def sentence(self) -> str:
        """'claude: 6 trials × $0.2000 median = $1.20 ($0.90–$1.50), from 20 recent trials'."""
        plural = "s" if self.trials != 1 else ""
        if self.median_usd is None:
            return f"{self.variant}: {self.trials} trial{plural}, no cost history"
        assert self.low_usd is not None and self.high_usd is not None
        return (
            f"{self.variant}: {self.trials} trial{plural} × {format_usd(self.median_usd)} median "
            f"= {format_usd(self.total_usd)} ({format_usd(self.low_usd * self.trials)}–"
            f"{format_usd(self.high_usd * self.trials)}), from {self.history} recent "
            f"trial{'s' if self.history != 1 else ''}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "trials": self.trials,
            "history_trials": self.history,
            "median_per_trial_usd": self.median_usd,
            "total_usd": self.total_usd,
            "low_usd": None if self.low_usd is None else self.low_usd * self.trials,
            "high_usd": None if self.high_usd is None else self.high_usd * self.trials,
        }


@dataclass(frozen=True)
class Forecast:
    variants: list[VariantForecast]

    @property
    def known(self) -> list[VariantForecast]:
        return [v for v in self.variants if v.median_usd is not None]

    @property
    def without_history(self) -> list[str]:
        return [v.variant for v in self.variants if v.median_usd is None]

    @property
    def total_usd(self) -> float | None:
        known = self.known
        return sum(v.total_usd or 0.0 for v in known) if known else None

    @property
    def low_usd(self) -> float | None:
        known = self.known
        return sum((v.low_usd or 0.0) * v.trials for v in known) if known else None

    @property
    def high_usd(self) -> float | None:
        known = self.known
        return sum((v.high_usd or 0.0) * v.trials for v in known) if known else None

    @property
    def headline(self) -> str:
        """'Forecast: $1.20 ($0.90–$1.50) from history' or 'Forecast: no cost history yet';
        a variant without history is named."""
        if not self.variants:
            return "Forecast: nothing to run"
        if not self.known:
            return "Forecast: no cost history for these variants yet"
        text = (
            f"Forecast: {format_usd(self.total_usd)} ({format_usd(self.low_usd)}–"
            f"{format_usd(self.high_usd)}) from recent trials"
        )
        if missing := self.without_history:
            text += f", not counting {', '.join(missing)} (no cost history)"
        return text

    @property
    def short(self) -> str:
        """For a button's side: '$1.20 ($0.90–$1.50)', or 'no cost history'."""
        if not self.variants:
            return "nothing to run"
        if not self.known:
            return "no cost history"
        text = (
            f"{format_usd(self.total_usd)} ({format_usd(self.low_usd)}–{format_usd(self.high_usd)})"
        )
        return text + (" + variants without history" if self.without_history else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_usd": self.total_usd,
            "low_usd": self.low_usd,
            "high_usd": self.high_usd,
            "variants": [v.to_dict() for v in self.variants],
        }


def forecast(organization: Organization, trials_by_variant: Mapping[str, int]) -> Forecast:
    """The forecast of running ``trials_by_variant`` ({variant name: trials}) in
    ``organization``, from its variants' recent trials (one query)."""
    wanted = {name: trials for name, trials in trials_by_variant.items() if trials > 0}
    return _forecast(wanted, _recent_costs(organization, wanted))


def _recent_costs(organization: Organization, names: Iterable[str]) -> dict[str, list[float]]:
    """Each variant's latest HISTORY_TRIALS known trial costs, newest first, in one query
    however many variants (a window numbers each variant's trials)."""
    wanted = sorted(set(names))
    costs: dict[str, list[float]] = {name: [] for name in wanted}
    if not wanted:
        return costs
    rows = (
        Trial.objects.filter(
            run__batch__organization=organization,
            run__variant__name__in=wanted,
            status__in=Trial.FINAL_STATUSES,
            cost_usd__isnull=False,
        )
        .annotate(
            variant_name=F("run__variant__name"),
            recency=Window(
                RowNumber(),
                partition_by=[F("run__variant__name")],
                order_by=[F("finished_at").desc(), F("id").desc()],
            ),
        )
        .filter(recency__lte=HISTORY_TRIALS)
        .order_by("variant_name", "recency")
        .values_list("variant_name", "cost_usd")
    )
    for name, cost in rows:
        if cost is not None:
            costs[name].append(cost)
    return costs


def _forecast(trials_by_variant: Mapping[str, int], costs: Mapping[str, list[float]]) -> Forecast:
    variants = []
    for name, trials in sorted(trials_by_variant.items()):
        if trials <= 0:
            continue
        known = costs.get(name) or []
        if not known:
            variants.append(VariantForecast(variant=name, trials=trials))
            continue
        variants.append(
            VariantForecast(
                variant=name,
                trials=trials,
                history=len(known),
                median_usd=median(known),
                low_usd=min(known),
                high_usd=max(known),
            )
        )
    return Forecast(variants)


@dataclass(frozen=True)
class RerunForecasts:
    """What each of the batch page's rerun buttons would cost."""

    batch: Forecast  # every trial again
    failed: Forecast  # the failed, errored and timed-out ones (runner.batches.reruns)
    errored: Forecast  # the errored ones


def rerun_forecasts(batch: Batch) -> RerunForecasts:
    """The forecast of each rerun of ``batch``, from its runs' counts (one query) and its
    variants' history (one query)."""
    rows = (
        Run.objects.filter(batch=batch)
        .order_by()
        .values("variant__name")
        .annotate(
            every=Sum("trials_total"),
            unsuccessful=Sum(F("trials_failed") + F("trials_errored") + F("trials_timed_out")),
            errored=Sum("trials_errored"),
        )
    )
    counts: dict[str, dict[str, int]] = {"every": {}, "unsuccessful": {}, "errored": {}}
    for name, every, unsuccessful, errored in rows.values_list(
        "variant__name", "every", "unsuccessful", "errored"
    ):
        counts["every"][name] = int(every or 0)
        counts["unsuccessful"][name] = int(unsuccessful or 0)
        counts["errored"][name] = int(errored or 0)
    costs = _recent_costs(
        batch.organization, [name for name, trials in counts["every"].items() if trials]
    )
    return RerunForecasts(
        batch=_forecast(counts["every"], costs),
        failed=_forecast(counts["unsuccessful"], costs),
        errored=_forecast(counts["errored"], costs),
    )
