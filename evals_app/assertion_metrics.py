"""Weighted assertions across a batch: each metric's pass rate and mean score per variant,
promptfoo's derived metrics over the variant's summed scores, and how each variant's trials
fared against their thresholds (a fixed number of queries)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Avg, BooleanField, CharField, Count, F, Max, Min, Q, Sum, Value, When
from django.db.models import Case as SqlCase

from evals_app.metric_expressions import UnusableExpression, metric_value
from evals_app.models import Batch, CaseVersion, Check, Run, Trial, Variant
from proctor.assertions import DERIVED_METRIC


@dataclass
class MetricCell:
    """How one metric's assertions did under one variant, across every trial of the batch."""

    passed: int
    total: int
    mean_score: float | None
    total_score: float | None = None  # the sum of its scores: promptfoo's named score
    # A derived metric's value over the variant's summed named scores (None: it has none).
    derived: float | None = None

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.total if self.total else None


@dataclass
class MetricRow:
    """One metric, or one assertion without a metric (grouped under its own name)."""

    name: str
    has_metric: bool
    # The lightest and heaviest weight among its assertions: usually one value.
    min_weight: float | None
    max_weight: float | None
    cells: list[MetricCell | None]  # in the order of BatchMetrics.variants
    # promptfoo's derivedMetrics: the expression its cells' ``derived`` values come from.
    expression: str | None = None
    expression_problem: str = ""  # why the expression gave no value, in one line

    @property
    def info_only(self) -> bool:
        """Weight 0 everywhere: recorded and charted, never deciding a trial."""
        return self.max_weight is not None and self.max_weight <= 0


@dataclass(frozen=True)
class VariantScore:
    """A variant's weighted scores across the batch: their mean, and the threshold held."""

    variant: Variant
    trials: int
    scored: int  # trials that have a weighted score
    mean_score: float | None
    held_to_threshold: int  # scored trials whose case sets a threshold
    met_threshold: int

    @property
    def met_rate(self) -> float | None:
        return self.met_threshold / self.held_to_threshold if self.held_to_threshold else None


@dataclass
class BatchMetrics:
    batch: Batch
    variants: list[VariantScore]
    rows: list[MetricRow]


def batch_metrics(batch: Batch) -> BatchMetrics:
    """Each metric's pass rate, mean score and weight per variant of ``batch``, and each
    variant's mean weighted score and threshold count, in three queries (variants, assertion
    checks grouped by metric and variant, trials grouped by variant).

    Rows come heaviest first (what decides the most on top), information-only ones last.
    """
    runs = Run.objects.filter(batch=batch)
    variants = list(Variant.objects.filter(pk__in=runs.values("variant_id")).order_by("name", "pk"))
    column = {variant.pk: i for i, variant in enumerate(variants)}

    # Assertions recorded without a metric are grouped under their own name, apart from a
    # metric that happens to share it.
    no_metric = Q(metric="")
    groups = (
        Check.objects.filter(trial__run__batch=batch, kind="assertion")
        .order_by()
        .annotate(
            metric_name=SqlCase(
                When(no_metric, then=F("name")), default=F("metric"), output_field=CharField()
            ),
            has_metric=SqlCase(
                When(no_metric, then=Value(False)), default=Value(True), output_field=BooleanField()
            ),
        )
        .values("metric_name", "has_metric", "trial__run__variant_id")
        .annotate(
            total=Count("id"),
            passed=Count("id", filter=Q(passed=True)),
            mean_score=Avg("score"),
            min_weight=Min("weight"),
            max_weight=Max("weight"),
            total_score=Sum("score"),
        )
    )
    rows: dict[tuple[str, bool], MetricRow] = {}
    for group in groups:
        key = (group["metric_name"], bool(group["has_metric"]))
        row = rows.get(key)
        if row is None:
            row = rows[key] = MetricRow(key[0], key[1], None, None, [None] * len(variants))
        row.min_weight = _least(row.min_weight, group["min_weight"])
        row.max_weight = _most(row.max_weight, group["max_weight"])
        index = column.get(group["trial__run__variant_id"])
        if index is not None:
            row.cells[index] = MetricCell(
                group["passed"], group["total"], group["mean_score"], group["total_score"]
            )
    _derive(rows, _derived_expressions(runs), len(variants))

    scored = Q(score__isnull=False)
    held = scored & Q(threshold__isnull=False)
    per_variant = {
        group["run__variant_id"]: group
        for group in Trial.objects.filter(run__batch=batch)
        .order_by()
        .values("run__variant_id")
        .annotate(
            trials=Count("id"),
            scored=Count("id", filter=scored),
            mean_score=Avg("score"),
            held=Count("id", filter=held),
            met=Count("id", filter=held & Q(score__gte=F("threshold"))),
        )
    }
    scores = []
    for variant in variants:
        counted: dict[str, Any] = dict(per_variant.get(variant.pk) or {})
        scores.append(
            VariantScore(
                variant=variant,
                trials=counted.get("trials", 0),
                scored=counted.get("scored", 0),
                mean_score=counted.get("mean_score"),
                held_to_threshold=counted.get("held", 0),
                met_threshold=counted.get("met", 0),
            )
        )
    ordered = sorted(rows.values(), key=lambda r: (-(r.max_weight or 0.0), r.name.lower()))
    return BatchMetrics(batch=batch, variants=scores, rows=ordered)


def _derived_expressions(runs: Any) -> dict[str, str]:
    """Each derived metric of the batch's case versions, by name (one query)."""
    found: dict[str, str] = {}
    versions = CaseVersion.objects.filter(pk__in=runs.values("case_version_id"))
    for definition in versions.values_list("definition", flat=True):
        for check in (definition or {}).get("checks") or ():
            if check.get("type") == DERIVED_METRIC and check.get("metric"):
                found.setdefault(check["metric"], str(check.get("value")))
    return found


def _derive(
    rows: dict[tuple[str, bool], MetricRow], expressions: dict[str, str], width: int
) -> None:
    """Sets each derived metric row's values: its expression over the other metrics' sums
    under each variant, as promptfoo computes it over a prompt's tests."""
    for name, expression in expressions.items():
        row = rows.get((name, True))
        if row is None:
            continue
        row.expression = expression
        for index in range(width):
            cell = row.cells[index]
            if cell is None:
                continue
            sums = {
                other.name: other.cells[index].total_score or 0.0  # type: ignore[union-attr]
                for other in rows.values()
                if other.has_metric
                and other.name not in expressions
                and other.cells[index] is not None
            }
            try:
                cell.derived = metric_value(expression, sums)
            except UnusableExpression as problem:
                row.expression_problem = str(problem)


def _least(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _most(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)
