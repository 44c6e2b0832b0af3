"""How many trials are enough, asked before a batch runs (``proctor eval --plan-trials DIFF``).

For each pair of variants the batch will run, over the cases both will run: the smallest
difference its cases and trials find with 80% power, and the trials per case (or the cases)
that the chosen difference needs (evals_app.estimators). The variance that decides it comes
from history: the latest batch of the organization in which both variants ran two or more of
the planned suites' cases. Without such a batch the plan says what it assumed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evals_app.estimators import VarianceComponents
from evals_app.models import Batch, Organization
from evals_app.variant_comparison import PowerPlan, UnknownVariant, compare_variants

# Without history: a pass/fail trial varies by at most 0.25 (a 50% case), so each side adds up
# to 0.25; how much the true difference varies between cases is unknown, taken as none. The
# real need is then at least what the plan says.
ASSUMED = VarianceComponents(between=0.0, within=0.5)
# How many recent batches of the suites are searched for one that ran both variants.
HISTORY_DEPTH = 20


@dataclass(frozen=True)
class PlannedPair:
    """One pair of variants of the batch about to run, and its power plan."""

    a: str
    b: str
    plan: PowerPlan
    history: Batch | None  # the batch the variance came from; None when assumed
    history_cases: int = 0

    @property
    def source(self) -> str:
        if self.history is None:
            return (
                "assumed: no earlier batch ran both on these suites (0.25 per-trial variance "
                "a side, none between cases), so this is the least it needs"
            )
        return (
            f"variance from batch {self.history.pk} ({self.history_cases} shared case"
            f"{'s' if self.history_cases != 1 else ''})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            **self.plan.to_dict(),
            "history_batch": self.history.pk if self.history else None,
            "source": self.source,
        }


def plan_pairs(
    organization: Organization,
    cases: Sequence[tuple[str, str, Sequence[str], int]],
    difference: float,
) -> list[PlannedPair]:
    """The power plan of each pair of variants in ``cases`` — (suite slug, case slug, variant
    names, trials) per planned case — for ``difference``. Costs a query or two per pair and
    batch of history searched."""
    names = sorted({name for _, _, variants, _ in cases for name in variants})
    slugs = sorted({suite for suite, *_ in cases})
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            both = [trials for _, _, variants, trials in cases if a in variants and b in variants]
            if not both:
                continue
            history, components, shared = _history(organization, slugs, a, b)
            plan = PowerPlan(
                cases=len(both),
                trials=max(set(both), key=both.count),
                components=components,
                difference=difference,
            )
            pairs.append(PlannedPair(a, b, plan, history, shared))
    return pairs


def _history(
    organization: Organization, slugs: list[str], a: str, b: str
) -> tuple[Batch | None, VarianceComponents, int]:
    """The latest batch that ran ``a`` and ``b`` on two or more cases of ``slugs``, its
    variance components and its shared cases; else (None, ASSUMED, 0)."""
    candidates = (
        Batch.objects.filter(
            organization=organization,
            runs__case_version__case__suite__slug__in=slugs,
            runs__variant__name=a,
        )
        .filter(runs__variant__name=b)
        .order_by("-created_at", "-id")
        .distinct()[:HISTORY_DEPTH]
    )
    for batch in candidates:
        try:
            pairs = compare_variants(batch, [a, b], suites=slugs).pairs
        except UnknownVariant:  # one of them ran only outside these suites
            continue
        if pairs and pairs[0].power is not None:
            return batch, pairs[0].power.components, len(pairs[0].cases)
    return None, ASSUMED, 0
