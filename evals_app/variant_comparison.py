"""Variant against variant within one batch: is agent X better than agent Y on these cases, and
can the difference be believed?

The case is the unit, its trials repeated measures of it (Miller 2024, "Adding Error Bars to
Evals"). Per variant: the mean over cases of each case's mean trial score (a trial scores 1 for
a pass and 0 otherwise, or its weighted score in a case of weighted assertions), with a 95%
interval from the case-clustered standard error. Per pair of variants, over the cases both ran
to a finished trial: the mean paired difference B - A of the case means with its interval (it
*holds* when the interval excludes 0), the exact McNemar test on per-case majority outcomes
beside it, the cases sorted by their difference, and the power: the smallest difference the
batch's cases and trials find 80% of the time, and how many trials per case (or cases) a
chosen difference would need.

One query for the trials (evals_app.merged), plus one per rerun generation when merged.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from itertools import combinations
from statistics import mode as most_common
from typing import Any

from evals_app.estimators import (
    ClusteredMean,
    VarianceComponents,
    case_mean,
    cases_needed,
    clustered_mean,
    mcnemar_exact,
    mean_pass_k_curves,
    minimum_detectable_difference,
    paired_difference,
    pass_k_curves,
    trials_needed,
    variance_components,
)
from evals_app.merged import TrialRow, batch_cells
from evals_app.models import Batch

# The difference a pair's power line asks about when none is chosen: 10 percentage points.
DEFAULT_DIFFERENCE = 0.10
# The McNemar test is significant below this p-value (two-sided).
ALPHA = 0.05

CaseKey = tuple[str, str]  # (suite slug, case slug)


class UnknownVariant(ValueError):
    """A variant asked for by name that the batch did not run."""


def trial_score(row: TrialRow) -> float:
    """What one finished trial scores: its weighted score when it has one, else 1.0 for a
    pass and 0.0 for anything else (a failure, a timeout, an error)."""
    if row.score is not None:
        return min(1.0, max(0.0, row.score))
    return 1.0 if row.passed else 0.0


@dataclass(frozen=True)
class CaseOutcome:
    """One case under one variant: its finished trials' scores and pass count."""

    scores: tuple[float, ...]
    passed: int

    @property
    def finished(self) -> int:
        return len(self.scores)

    @property
    def mean(self) -> float:
        return case_mean(self.scores)

    @property
    def majority_passed(self) -> bool:
        """Passed by a strict majority of its finished trials (the McNemar outcome)."""
        return self.passed * 2 > self.finished

    def to_dict(self) -> dict[str, Any]:
        curves = pass_k_curves(self.finished, self.passed)
        return {
            "finished": self.finished,
            "passed": self.passed,
            "mean": _r(self.mean),
            "majority_passed": self.majority_passed,
            "pass_at_k": _curve(curves["pass@k"]),
            "pass_hat_k": _curve(curves["pass^k"]),
        }


@dataclass(frozen=True)
class VariantSummary:
    """One variant over the cases it finished a trial of."""

    variant: str
    outcomes: dict[CaseKey, CaseOutcome]
    scored: bool  # a weighted score stands for some trial's pass or fail

    @property
    def cases(self) -> int:
        return len(self.outcomes)

    @property
    def trials(self) -> int:
        return sum(o.finished for o in self.outcomes.values())

    @property
    def measure(self) -> str:
        return "mean score" if self.scored else "mean pass rate"

    @property
    def estimate(self) -> ClusteredMean | None:
        if not self.outcomes:
            return None
        return clustered_mean([o.scores for o in self.outcomes.values()])

    @property
    def pass_k(self) -> dict[str, dict[int, float]]:
        return mean_pass_k_curves([(o.finished, o.passed) for o in self.outcomes.values()])

    @property
    def top_k(self) -> int | None:
        """The largest k every case reaches (pass@k and pass^k are shown at it)."""
        return max(self.pass_k["pass@k"], default=None)

    @property
    def pass_at_top_k(self) -> float | None:
        return self.pass_k["pass@k"].get(self.top_k or 0)

    @property
    def pass_hat_top_k(self) -> float | None:
        return self.pass_k["pass^k"].get(self.top_k or 0)

    def to_dict(self) -> dict[str, Any]:
        estimate = self.estimate
        return {
            "variant": self.variant,
            "cases": self.cases,
            "finished_trials": self.trials,
            "measure": self.measure,
            "mean": _r(estimate.mean) if estimate else None,
            "standard_error": _r(estimate.standard_error) if estimate else None,
            "interval": _interval(estimate.interval) if estimate else None,
            "pass_at_k": _curve(self.pass_k["pass@k"]),
            "pass_hat_k": _curve(self.pass_k["pass^k"]),
        }


@dataclass(frozen=True)
class CaseDifference:
    """One case both variants of a pair ran: B's case mean less A's."""

    suite: str
    case: str
    case_name: str
    a: CaseOutcome
    b: CaseOutcome

    @property
    def difference(self) -> float:
        return self.b.mean - self.a.mean

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "case": self.case,
            "case_name": self.case_name,
            "difference": _r(self.difference),
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
        }


@dataclass(frozen=True)
class PowerPlan:
    """How far a pair's cases and trials reach: the minimum detectable difference at 80% power,
    and what a chosen difference would need."""

    cases: int
    trials: int  # per case and variant, the most common count among the pair's cases
    components: VarianceComponents
    difference: float  # the chosen difference

    @property
    def minimum_detectable(self) -> float:
        return minimum_detectable_difference(self.components, self.cases, self.trials)

    @property
    def trials_needed(self) -> int | None:
        """Trials per case that find ``difference`` over these cases; None when none can."""
        return trials_needed(self.components, self.cases, self.difference)

    @property
    def cases_needed(self) -> int:
        """Cases that find ``difference`` at this many trials per case."""
        return cases_needed(self.components, self.trials, self.difference)

    @property
    def sentence(self) -> str:
        """What to do for the chosen difference, in one line."""
        wanted = f"{self.difference * 100:.0f} points"
        if self.minimum_detectable <= self.difference + 1e-12:
            return f"{self.cases} cases × {self.trials} trials already find {wanted}"
        needed = self.trials_needed
        more_cases = f"{self.cases_needed} cases at {self.trials} trials"
        if needed is None:
            if self.components.within is None:
                return f"{wanted} needs {more_cases} (run 2+ trials to see what more trials buy)"
            return f"{wanted} needs more cases: {more_cases}; no number of trials is enough"
        return f"{wanted} needs {needed} trials per case, or {more_cases}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "power": 0.8,
            "alpha": ALPHA,
            "cases": self.cases,
            "trials_per_case": self.trials,
            "minimum_detectable_difference": _r(self.minimum_detectable),
            "between_case_variance": _r(self.components.between),
            "within_case_variance": _r(self.components.within),
            "difference": self.difference,
            "trials_needed": self.trials_needed,
            "cases_needed": self.cases_needed,
            "advice": self.sentence,
        }


@dataclass(frozen=True)
class VariantPair:
    """Variant B measured against variant A over the cases both ran."""

    a: str
    b: str
    cases: list[CaseDifference]  # by difference, where B trails A most first
    power: PowerPlan | None

    @property
    def estimate(self) -> ClusteredMean | None:
        if not self.cases:
            return None
        return paired_difference([(c.a.scores, c.b.scores) for c in self.cases])

    @property
    def only_a(self) -> list[str]:
        """Cases passing (by majority) under A only."""
        return [_name(c) for c in self.cases if c.a.majority_passed and not c.b.majority_passed]

    @property
    def only_b(self) -> list[str]:
        return [_name(c) for c in self.cases if c.b.majority_passed and not c.a.majority_passed]

    @property
    def p_value(self) -> float:
        return mcnemar_exact(len(self.only_a), len(self.only_b))

    @property
    def significant(self) -> bool:
        return self.p_value < ALPHA

    @property
    def holds(self) -> bool:
        """The paired difference's 95% interval excludes 0."""
        estimate = self.estimate
        if estimate is None or estimate.interval is None:
            return False
        low, high = estimate.interval
        return low > 0 or high < 0

    @property
    def leader(self) -> str | None:
        """The variant ahead on the mean paired difference; None on a tie or nothing shared."""
        estimate = self.estimate
        if estimate is None or abs(estimate.mean) < 1e-12:
            return None
        return self.b if estimate.mean > 0 else self.a

    @property
    def sentence(self) -> str:
        """Who wins and whether it holds, in one sentence."""
        estimate = self.estimate
        if estimate is None:
            return f"{self.a} and {self.b} share no case with a finished trial: nothing to compare."
        n = len(self.cases)
        over = f"over {n} shared case{'s' if n != 1 else ''}"
        leader = self.leader
        if leader is None:
            return f"{self.a} and {self.b} do equally well {over}."
        other = self.a if leader == self.b else self.b
        points = f"{abs(estimate.mean) * 100:.1f} points"
        if estimate.interval is None:
            return f"{leader} leads {other} by {points} on the one shared case: too few to say."
        # Told from the leader's side: the interval of leader - other.
        low, high = (x * 100 for x in estimate.interval)
        if leader == self.a:
            low, high = -high, -low
        interval = f"95% interval {low:+.1f} to {high:+.1f} for {leader} − {other}"
        if self.holds:
            return f"{leader} beats {other} by {points} {over} ({interval}): the difference holds."
        return (
            f"{leader} leads {other} by {points} {over} ({interval}): "
            "not a reliable difference, the interval includes 0."
        )

    def to_dict(self) -> dict[str, Any]:
        estimate = self.estimate
        return {
            "a": self.a,
            "b": self.b,
            "shared_cases": len(self.cases),
            "difference": {
                "mean": _r(estimate.mean) if estimate else None,
                "standard_error": _r(estimate.standard_error) if estimate else None,
                "interval": _interval(estimate.interval) if estimate else None,
            },
            "holds": self.holds,
            "leader": self.leader,
            "headline": self.sentence,
            "mcnemar": {
                "only_a": self.only_a,
                "only_b": self.only_b,
                "p_value": _r(self.p_value),
                "significant": self.significant,
            },
            "power": self.power.to_dict() if self.power else None,
            "cases": [c.to_dict() for c in self.cases],
        }


@dataclass
class VariantComparison:
    """The variants of one batch, each on its own and pair by pair."""

    batch: Batch
    merged: bool
    variants: list[VariantSummary]
    pairs: list[VariantPair]

    @property
    def headline_pair(self) -> VariantPair | None:
        """The pair the headline speaks of: the only one, else the two best variants."""
        if len(self.pairs) <= 1:
            return self.pairs[0] if self.pairs else None
        ranked = sorted(
            (v for v in self.variants if v.estimate),
            key=lambda v: -v.estimate.mean,  # type: ignore[union-attr]
        )[:2]
        names = {v.variant for v in ranked}
        return next((p for p in self.pairs if {p.a, p.b} == names), self.pairs[0])

    @property
    def headline(self) -> str:
        if not self.variants:
            return "No trial of this batch has finished yet: nothing to compare."
        if len(self.variants) == 1:
            return (
                f"Only {self.variants[0].variant} ran: there is no other variant to compare with."
            )
        pair = self.headline_pair
        assert pair is not None
        if len(self.variants) > 2 and pair.leader:
            return f"Of the top two: {pair.sentence}"
        return pair.sentence

    def to_dict(self) -> dict[str, Any]:
        """As JSON (``proctor compare BATCH --variants A B --json`` and the API)."""
        return {
            "batch": {"id": self.batch.pk, "label": self.batch.label},
            "merged": self.merged,
            "headline": self.headline,
            "method": {
                "unit": "case; trials are repeated measures within it",
                "variant_interval": "mean of case means ± 1.96 × case-clustered standard error",
                "difference_interval": "mean paired per-case difference B − A ± 1.96 × its "
                "standard error over shared cases",
                "paired_test": "exact McNemar, two-sided, on per-case majority outcomes",
                "power": "two-sided 5% test, 80% power: (1.96 + 0.84) × sqrt((between + "
                "within / trials) / cases)",
                "alpha": ALPHA,
            },
            "variants": [v.to_dict() for v in self.variants],
            "pairs": [p.to_dict() for p in self.pairs],
        }


def compare_variants(
    batch: Batch,
    names: Sequence[str] | None = None,
    *,
    merged: bool = True,
    mode: str = "latest",
    difference: float = DEFAULT_DIFFERENCE,
    suites: Collection[str] | None = None,
) -> VariantComparison:
    """Compare the variants of ``batch`` (those in ``names``, in that order, else all of them
    by name): each with its clustered interval, and each pair (A before B) with its paired
    difference, McNemar test and power for ``difference``; ``suites`` keeps only the cases of
    those suite slugs. Raises UnknownVariant naming a variant the batch did not run."""
    cells = batch_cells(batch, merged=merged, mode=mode)
    if suites is not None:
        cells = {key: rows for key, rows in cells.items() if key[0] in suites}
    ran = sorted({key[2] for key in cells})
    if names:
        missing = [name for name in names if name not in ran]
        if missing:
            raise UnknownVariant(
                f"batch {batch.pk} ran no variant {', '.join(repr(m) for m in missing)} "
                f"(it ran {', '.join(ran) or 'none'})"
            )
    chosen = list(dict.fromkeys(names)) if names else ran
    case_names: dict[CaseKey, str] = {}
    summaries = []
    for name in chosen:
        outcomes: dict[CaseKey, CaseOutcome] = {}
        scored = False
        for (suite, case, variant), rows in cells.items():
            finished = [r for r in rows if variant == name and r.is_final]
            if not finished:
                continue
            case_names[(suite, case)] = finished[0].case_name
            scored = scored or any(r.score is not None for r in finished)
            outcomes[(suite, case)] = CaseOutcome(
                tuple(trial_score(r) for r in finished), sum(1 for r in finished if r.passed)
            )
        summaries.append(VariantSummary(name, outcomes, scored))
    with_trials = [s for s in summaries if s.outcomes]
    pairs = [_pair(a, b, case_names, difference) for a, b in combinations(with_trials, 2)]
    return VariantComparison(batch=batch, merged=merged, variants=with_trials, pairs=pairs)


def _pair(
    a: VariantSummary, b: VariantSummary, case_names: dict[CaseKey, str], difference: float
) -> VariantPair:
    shared = sorted(a.outcomes.keys() & b.outcomes.keys())
    cases = [
        CaseDifference(
            suite,
            case,
            case_names[(suite, case)],
            a.outcomes[(suite, case)],
            b.outcomes[(suite, case)],
        )
        for suite, case in shared
    ]
    # Rounded: 1 - 2/3 and 1/3 - 0 are the same difference, not two floats apart.
    cases.sort(key=lambda c: (round(c.difference, 9), c.suite, c.case))
    power = None
    if len(cases) >= 2:
        power = PowerPlan(
            cases=len(cases),
            trials=most_common(min(c.a.finished, c.b.finished) for c in cases),
            components=variance_components([(c.a.scores, c.b.scores) for c in cases]),
            difference=difference,
        )
    return VariantPair(a.variant, b.variant, cases, power)


def _name(case: CaseDifference) -> str:
    return f"{case.suite}/{case.case}"


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _interval(bounds: tuple[float, float] | None) -> list[float | None] | None:
    return None if bounds is None else [_r(bounds[0]), _r(bounds[1])]


def _curve(values: dict[int, float]) -> dict[str, float | None]:
    return {str(k): _r(v) for k, v in values.items()}
