"""The batches list as the batches page and the API both read it: a user's batches, filtered
by suite, label, status, who started it and when, each counted in the same query.

One query for the page of batches (trial counts by status, cost, run count are aggregates on
it) plus one for the suites of the batches on that page, whatever the number of batches.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.utils import timezone

from dashboard.access import batches_for
from evals_app.models import Batch, Run, Trial

_STATUS = Trial.Status


class BadBatchFilter(ValueError):
    """A filter value no batch could match the meaning of (a malformed date); its message is
    the one sentence shown to the reader."""


@dataclass(frozen=True)
class BatchFilters:
    """What the reader narrowed the list to; empty strings mean "any"."""

    suite: str = ""
    label: str = ""
    status: str = ""
    who: str = ""
    since: date | None = None
    until: date | None = None

    @classmethod
    def from_query(cls, params: Any) -> BatchFilters:
        """Read ``suite``, ``label``, ``status``, ``who``, ``since`` and ``until`` (YYYY-MM-DD)
        from a QueryDict; a malformed date raises BadBatchFilter."""
        status = params.get("status", "").strip()
        if status and status not in Batch.Status.values:
            raise BadBatchFilter(
                f"status must be one of {', '.join(Batch.Status.values)}, not {status[:40]!r}."
            )
        return cls(
            suite=params.get("suite", "").strip(),
            label=params.get("label", "").strip(),
            status=status,
            who=params.get("who", "").strip(),
            since=_date(params, "since"),
            until=_date(params, "until"),
        )

    def as_query(self) -> dict[str, str]:
        """The filters as query parameters (for links that keep them)."""
        values = {
            "suite": self.suite,
            "label": self.label,
            "status": self.status,
            "who": self.who,
            "since": self.since.isoformat() if self.since else "",
            "until": self.until.isoformat() if self.until else "",
        }
        return {key: value for key, value in values.items() if value}


def _date(params: Any, name: str) -> date | None:
    raw = params.get(name, "").strip()
    if not raw:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise BadBatchFilter(f"{name} must be a date like 2026-01-31, not {raw[:40]!r}.") from None


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def filtered_batches(user, filters: BatchFilters) -> QuerySet[Batch]:
    """The user's batches matching ``filters``, newest first, annotated with the trial counts
    by status (``trials_<status>``, ``trials_total``), ``cost_usd`` (a sum, None when no trial
    knows its cost) and ``costed_trials``."""
    batches = batches_for(user)
    if filters.suite:
        batches = batches.filter(
            pk__in=Run.objects.filter(case_version__case__suite__slug=filters.suite).values(
                "batch_id"
            )
        )
    if filters.label:
        batches = batches.filter(label__icontains=filters.label)
    if filters.status:
        batches = batches.filter(status=filters.status)
    if filters.who:
        batches = batches.filter(created_by__username=filters.who)
    if filters.since:
        batches = batches.filter(created_at__gte=_day_start(filters.since))
    if filters.until:
        # The whole day named is included.
        batches = batches.filter(created_at__lt=_day_start(filters.until) + timedelta(days=1))
    counts = {
        f"trials_{status}": Count("runs__trials", filter=Q(runs__trials__status=status))
        for status in _STATUS.values
    }
    return (
        batches.select_related("created_by", "parent")
        .annotate(
            trials_total=Count("runs__trials"),
            cost_usd=Sum("runs__trials__cost_usd"),
            costed_trials=Count("runs__trials__cost_usd"),
            **counts,
        )
        .order_by("-created_at", "-id")
    )


@dataclass
class BatchSummary:
    """One line of the batches list."""

    batch: Batch
    suites: list[str] = field(default_factory=list)

    def _count(self, status: str) -> int:
        return int(getattr(self.batch, f"trials_{status}", 0) or 0)

    @property
    def counts(self) -> dict[str, int]:
        """Trials by status, every status present (zeros included)."""
        return {status: self._count(status) for status in _STATUS.values}

    @property
    def total(self) -> int:
        return int(getattr(self.batch, "trials_total", 0) or 0)

    @property
    def finished(self) -> int:
        return sum(self._count(s) for s in Trial.FINAL_STATUSES)

    @property
    def passed(self) -> int:
        return self._count(_STATUS.PASSED)

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.finished if self.finished else None

    @property
    def cost_usd(self) -> float | None:
        cost = getattr(self.batch, "cost_usd", None)
        return None if cost is None else float(cost)

    @property
    def cost_per_pass(self) -> float | None:
        """What one passed trial cost: the batch's cost over its passed trials."""
        cost = self.cost_usd
        return None if cost is None or not self.passed else cost / self.passed

    @property
    def duration_ms(self) -> int | None:
        """From the batch's creation to its end (to now while it runs)."""
        end = self.batch.finished_at or (
            None if self.batch.status == Batch.Status.FINISHED else timezone.now()
        )
        if end is None:
            return None
        return max(0, round((end - self.batch.created_at).total_seconds() * 1000))


def summarize(batches: list[Batch]) -> list[BatchSummary]:
    """The lines of ``batches`` (already annotated by ``filtered_batches``) with the suites each
    ran, in one query for them all."""
    suites: dict[int, set[str]] = defaultdict(set)
    for batch_id, slug in (
        Run.objects.filter(batch__in=[b.pk for b in batches])
        .order_by()
        .values_list("batch_id", "case_version__case__suite__slug")
        .distinct()
    ):
        suites[batch_id].add(slug)
    return [BatchSummary(batch, sorted(suites.get(batch.pk, ()))) for batch in batches]
