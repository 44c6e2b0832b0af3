"""Flaky cells: the same agent on the same case version does not always come out the same.

A cell (case version x variant) is flaky when its graded trials have mixed outcomes: some
passed and some did not, within one batch (2 of 3 passes) or across the batches that ran that
very case version under that very variant. A Variant row is one spec, profile digest included,
so "the same variant" means the same agent, byte for byte. Errored trials (infrastructure, not
the agent) are left out; a timeout counts as not passing.

Each function costs a fixed number of queries, whatever the number of cells or batches, and
reads the runs' counts of their trials (migration 0009), never the trials themselves.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Case, F, Max, Min, QuerySet, Sum, When

from evals_app.models import Batch, Organization, Run, Trial

GRADED = (Trial.Status.PASSED, Trial.Status.FAILED, Trial.Status.TIMED_OUT)
# A run's graded trials, from its counts.
_GRADED_COUNT = F("trials_passed") + F("trials_failed") + F("trials_timed_out")


@dataclass(frozen=True)
class BatchOutcome:
    """How one batch's trials of the cell came out."""

    batch_id: int
    created_at: datetime
    label: str
    passed: int
    graded: int

    @property
    def mixed(self) -> bool:
        return 0 < self.passed < self.graded

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch": self.batch_id,
            "created_at": self.created_at.isoformat(),
            "label": self.label,
            "passed": self.passed,
            "graded": self.graded,
        }


@dataclass
class FlakyHistory:
    """A cell's outcomes batch by batch, oldest first, and why it counts as flaky."""

    case_version_id: int
    variant_id: int
    suite: str
    case: str
    case_version: int
    variant: str
    history: list[BatchOutcome] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(h.passed for h in self.history)

    @property
    def graded(self) -> int:
        return sum(h.graded for h in self.history)

    @property
    def mixed_within_batch(self) -> bool:
        """Some batch's own trials of the cell disagree."""
        return any(h.mixed for h in self.history)

    @property
    def mixed_across_batches(self) -> bool:
        """The batches disagree: one passed every trial, another passed none, or the like."""
        rates = {h.passed / h.graded for h in self.history if h.graded}
        return len(rates) > 1

    @property
    def flaky(self) -> bool:
        return 0 < self.passed < self.graded

    @property
    def reason(self) -> str:
        """Why it is flaky, for a tooltip: "2/3 passed in batch 4; 5/9 over 3 batches"."""
        parts = [
            f"{h.passed}/{h.graded} passed in batch {h.batch_id}" for h in self.history if h.mixed
        ]
        if len(self.history) > 1:
            parts.append(f"{self.passed}/{self.graded} over {len(self.history)} batches")
        return "; ".join(parts) or f"{self.passed}/{self.graded} passed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "case": self.case,
            "case_version": self.case_version,
            "case_version_id": self.case_version_id,
            "variant": self.variant,
            "variant_id": self.variant_id,
            "passed": self.passed,
            "graded": self.graded,
            "mixed_within_batch": self.mixed_within_batch,
            "mixed_across_batches": self.mixed_across_batches,
            "reason": self.reason,
            "history": [h.to_dict() for h in self.history],
        }


def _outcomes(runs: QuerySet[Run]) -> list[Mapping[str, Any]]:
    """Each batch's graded trials of each cell among ``runs``, from the runs' counts."""
    rows: Iterable[Mapping[str, Any]] = (
        runs.order_by()
        .values("case_version_id", "variant_id", "batch_id")
        .annotate(
            created_at=Min("batch__created_at"),
            label=Max("batch__label"),
            passed=Sum("trials_passed"),
            graded=Sum(_GRADED_COUNT),
        )
        .filter(graded__gt=0)
    )
    return list(rows)


def _histories(rows: list[Mapping[str, Any]], names: dict[tuple[int, int], tuple]) -> dict:
    found: dict[tuple[int, int], FlakyHistory] = {}
    for row in sorted(rows, key=lambda r: (r["created_at"], r["batch_id"])):
        pair = (row["case_version_id"], row["variant_id"])
        if pair not in names:
            continue
        if pair not in found:
            suite, case, number, variant = names[pair]
            found[pair] = FlakyHistory(pair[0], pair[1], suite, case, number, variant)
        found[pair].history.append(
            BatchOutcome(
                row["batch_id"], row["created_at"], row["label"], row["passed"], row["graded"]
            )
        )
    return found


_NAME_FIELDS = (
    "case_version_id",
    "variant_id",
    "case_version__case__suite__slug",
    "case_version__case__slug",
    "case_version__number",
    "variant__name",
)


def flaky_cells(
    batch: Batch, case_version_ids: Collection[int] | None = None
) -> dict[int, FlakyHistory]:
    """``{run id: FlakyHistory}`` for each cell of ``batch`` that is flaky, within the batch or
    across every batch of its organization that ran the same case version and variant (two
    queries). ``case_version_ids`` limits the cells to those rows (a page of the grid)."""
    runs_of_batch = Run.objects.filter(batch=batch)
    if case_version_ids is not None:
        runs_of_batch = runs_of_batch.filter(case_version_id__in=case_version_ids)
    runs = list(runs_of_batch.order_by().values("id", *_NAME_FIELDS))
    names = {
        (r["case_version_id"], r["variant_id"]): (
            r["case_version__case__suite__slug"],
            r["case_version__case__slug"],
            r["case_version__number"],
            r["variant__name"],
        )
        for r in runs
    }
    same_cells = Run.objects.filter(
        batch__organization_id=batch.organization_id,
        case_version_id__in={r["case_version_id"] for r in runs},
        variant_id__in={r["variant_id"] for r in runs},
    )
    histories = _histories(_outcomes(same_cells), names)
    return {
        r["id"]: history
        for r in runs
        if (history := histories.get((r["case_version_id"], r["variant_id"]))) and history.flaky
    }


def _flaky_groups(batch: Batch):
    """The flaky cells of ``batch``, by the rule of ``flaky_cells``, as a grouped query of
    (case version id, variant id): the organization's runs grouped by cell, keeping the cells
    ``batch`` ran whose graded trials have some passed and some not. One pass over the runs,
    where asking of each run whether ``batch`` has its cell cost a lookup per run."""
    return (
        Run.objects.filter(batch__organization_id=batch.organization_id)
        .order_by()
        .values("case_version_id", "variant_id")
        .annotate(
            in_batch=Sum(Case(When(batch_id=batch.pk, then=1), default=0)),
            passed=Sum("trials_passed"),
            graded=Sum(_GRADED_COUNT),
        )
        .filter(in_batch__gt=0, passed__gt=0, graded__gt=F("passed"))
    )


def flaky_pairs(batch: Batch) -> set[tuple[int, int]]:
    """The flaky cells of ``batch`` as (case version id, variant id), counted by the database
    (one query), without a history per cell: what the grid's flaky filter needs."""
    return set(_flaky_groups(batch).values_list("case_version_id", "variant_id"))


def flaky_count(batch: Batch) -> int:
    """How many cells of ``batch`` are flaky (one query)."""
    return _flaky_groups(batch).count()


def flaky_list(organization: Organization, suite_slug: str) -> list[FlakyHistory]:
    """Every flaky cell (case version x variant) of the suite ``suite_slug`` over all the
    organization's batches, the most uncertain first (pass rate nearest one half), in two
    queries."""
    runs = Run.objects.filter(
        batch__organization=organization, case_version__case__suite__slug=suite_slug
    )
    names = {
        (r["case_version_id"], r["variant_id"]): (
            r["case_version__case__suite__slug"],
            r["case_version__case__slug"],
            r["case_version__number"],
            r["variant__name"],
        )
        for r in runs.order_by().values(*_NAME_FIELDS).distinct()
    }
    flaky = [h for h in _histories(_outcomes(runs), names).values() if h.flaky]
    flaky.sort(key=lambda h: (abs(h.passed / h.graded - 0.5), h.case, h.case_version, h.variant))
    return flaky
