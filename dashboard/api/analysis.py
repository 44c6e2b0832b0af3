"""The API of the analysis: the batches list with its filters, compare (two batches, or a
batch against its suite's baseline), pass@k and pass^k, flaky cells, cost, and marking a
baseline.

Every object is fetched through ``dashboard.access``: another organization's batch or suite
is a 404. A malformed query value is a 400 naming the parameter, in one sentence.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from dashboard import access, query_numbers
from dashboard.api.paging import KeysetPagination
from dashboard.batch_filters import BadBatchFilter, BatchFilters, filtered_batches, summarize
from evals_app.comparison import compare_batches, suite_baseline
from evals_app.cost import CostSummary, batch_cost, summarize_costs
from evals_app.estimators import pass_at_k, pass_hat_k
from evals_app.failure_groups import failure_groups
from evals_app.flakiness import flaky_cells, flaky_list
from evals_app.judge_agreement import exported_labels, judge_agreements
from evals_app.merged import TrialRow, batch_cells
from evals_app.models import Batch
from evals_app.variant_comparison import DEFAULT_DIFFERENCE, UnknownVariant, compare_variants

# --- response shapes (for the schema; the bodies are built from the domain's to_dict) -----------


class CostSerializer(serializers.Serializer):
    trials = serializers.IntegerField()
    passed = serializers.IntegerField()
    costed_trials = serializers.IntegerField(help_text="Trials whose cost is known.")
    total_usd = serializers.FloatField(allow_null=True)
    per_trial_usd = serializers.FloatField(allow_null=True)
    per_passed_trial_usd = serializers.FloatField(
        allow_null=True, help_text="Everything spent, failures included, over the passed trials."
    )


class BatchSummarySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    created_by = serializers.CharField(allow_null=True)
    label = serializers.CharField(allow_blank=True)
    status = serializers.ChoiceField(choices=Batch.Status.choices)
    suites = serializers.ListField(child=serializers.CharField())
    parent = serializers.IntegerField(allow_null=True, help_text="The batch this one reran.")
    is_baseline = serializers.BooleanField()
    trial_counts = serializers.DictField(
        child=serializers.IntegerField(), help_text="Trials per status, every status present."
    )
    pass_rate = serializers.FloatField(allow_null=True, help_text="Passed over finished trials.")
    cost_usd = serializers.FloatField(allow_null=True)
    cost_per_passed_trial_usd = serializers.FloatField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)


class BatchSummaryPageSerializer(serializers.Serializer):
    """One page of the batches list (``dashboard.api.paging``'s envelope: pages by cursor)."""

    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = BatchSummarySerializer(many=True)


class ComparedBatchSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    label = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    is_baseline = serializers.BooleanField()
    cost = CostSerializer()


class WarningSerializer(serializers.Serializer):
    kind = serializers.CharField(
        help_text="case_version, agent_digest, model, harness, cli_version, proctor_version, "
        "judge_model, responder_model, sandbox, trial_count or cells"
    )
    message = serializers.CharField()


class CellSideSerializer(serializers.Serializer):
    case_versions = serializers.ListField(child=serializers.IntegerField())
    trials = serializers.IntegerField()
    finished = serializers.IntegerField()
    passed = serializers.IntegerField()
    failed = serializers.IntegerField()
    timed_out = serializers.IntegerField()
    errored = serializers.IntegerField()
    pass_rate = serializers.FloatField(allow_null=True)
    interval = serializers.ListField(
        child=serializers.FloatField(), help_text="95% Wilson interval of the pass rate."
    )
    case_passed = serializers.BooleanField(allow_null=True)
    cost = CostSerializer()
    trial_ids = serializers.ListField(child=serializers.IntegerField())


class ComparedCellSerializer(serializers.Serializer):
    suite = serializers.CharField()
    case = serializers.CharField()
    case_name = serializers.CharField()
    variant = serializers.CharField()
    a = CellSideSerializer(allow_null=True)
    b = CellSideSerializer(allow_null=True)
    delta = serializers.FloatField(allow_null=True, help_text="B's pass rate minus A's.")
    delta_interval = serializers.ListField(
        child=serializers.FloatField(),
        allow_null=True,
        help_text="95% Newcombe hybrid score interval of the difference.",
    )
    change = serializers.ChoiceField(
        choices=["regression", "improvement", "same", "only_in_a", "only_in_b", "pending"]
    )
    regression = serializers.BooleanField()
    improvement = serializers.BooleanField()
    significant = serializers.BooleanField(help_text="The difference's interval excludes 0.")


class VariantSideSerializer(serializers.Serializer):
    pass_rate = serializers.FloatField(allow_null=True)
    interval = serializers.ListField(child=serializers.FloatField())
    trials = serializers.IntegerField()
    cost = CostSerializer()


class ComparedVariantSerializer(serializers.Serializer):
    variant = serializers.CharField()
    shared_cases = serializers.IntegerField()
    cases_passing_a = serializers.IntegerField()
    cases_passing_b = serializers.IntegerField()
    only_a = serializers.ListField(
        child=serializers.CharField(), help_text="Lost: passing in A only."
    )
    only_b = serializers.ListField(
        child=serializers.CharField(), help_text="Gained: passing in B only."
    )
    test = serializers.CharField(help_text="The paired test, by name.")
    p_value = serializers.FloatField()
    significant = serializers.BooleanField()
    a = VariantSideSerializer()
    b = VariantSideSerializer()


class ComparisonSerializer(serializers.Serializer):
    a = ComparedBatchSerializer()
    b = ComparedBatchSerializer()
    merged = serializers.BooleanField(help_text="Each batch read with its reruns.")
    headline = serializers.CharField()
    cases_passing = serializers.DictField(child=serializers.IntegerField())
    regressions = serializers.IntegerField()
    significant_regressions = serializers.IntegerField()
    improvements = serializers.IntegerField()
    has_significant_regression = serializers.BooleanField()
    method = serializers.DictField(help_text="The intervals and the paired test used.")
    warnings = WarningSerializer(many=True)
    variants = ComparedVariantSerializer(many=True)
    cells = ComparedCellSerializer(many=True)


class EstimateSerializer(serializers.Serializer):
    k = serializers.IntegerField()
    pass_at_k = serializers.FloatField(help_text="Chance at least one of k trials passes.")
    pass_hat_k = serializers.FloatField(help_text="Chance all k trials pass.")


class PassAtKCellSerializer(serializers.Serializer):
    suite = serializers.CharField()
    case = serializers.CharField()
    case_version = serializers.IntegerField()
    variant = serializers.CharField()
    n = serializers.IntegerField(help_text="Finished trials.")
    c = serializers.IntegerField(help_text="Passed trials.")
    estimates = EstimateSerializer(many=True)


class PassAtKVariantSerializer(serializers.Serializer):
    variant = serializers.CharField()
    cells = serializers.IntegerField(help_text="Cells with a finished trial.")
    estimates = EstimateSerializer(
        many=True, help_text="Means over the cells, for each k every cell reaches."
    )


class PassAtKSerializer(serializers.Serializer):
    batch = serializers.IntegerField()
    merged = serializers.BooleanField()
    method = serializers.CharField()
    cells = PassAtKCellSerializer(many=True)
    variants = PassAtKVariantSerializer(many=True)


class FlakyOutcomeSerializer(serializers.Serializer):
    batch = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    label = serializers.CharField(allow_blank=True)
    passed = serializers.IntegerField()
    graded = serializers.IntegerField()


class FlakyCellSerializer(serializers.Serializer):
    suite = serializers.CharField()
    case = serializers.CharField()
    case_version = serializers.IntegerField()
    case_version_id = serializers.IntegerField()
    variant = serializers.CharField()
    variant_id = serializers.IntegerField()
    passed = serializers.IntegerField()
    graded = serializers.IntegerField()
    mixed_within_batch = serializers.BooleanField()
    mixed_across_batches = serializers.BooleanField()
    reason = serializers.CharField()
    history = FlakyOutcomeSerializer(many=True)


class FlakyListSerializer(serializers.Serializer):
    cells = FlakyCellSerializer(many=True)


class CellCostSerializer(CostSerializer):
    suite = serializers.CharField()
    case = serializers.CharField()
    variant = serializers.CharField()


class VariantCostSerializer(CostSerializer):
    variant = serializers.CharField()


class BatchCostSerializer(serializers.Serializer):
    batch = serializers.IntegerField()
    merged = serializers.BooleanField()
    total = CostSerializer()
    variants = VariantCostSerializer(many=True)
    cells = CellCostSerializer(many=True)


class FailureGroupSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["failed", "errored"])
    count = serializers.IntegerField()
    check = serializers.CharField(
        allow_null=True, help_text="The first failing check's name; null for an errored trial."
    )
    signature = serializers.CharField(
        help_text="The message with paths, ids, hex and numbers replaced: what the group shares."
    )
    message = serializers.CharField(help_text="The first trial's own message (its first line).")
    cause = serializers.CharField(help_text='The cause in one line: "<message> in check <name>".')
    trial_ids = serializers.ListField(child=serializers.IntegerField())
    urls = serializers.ListField(child=serializers.URLField(), help_text="Each trial's page.")


class FailureGroupsSerializer(serializers.Serializer):
    batch = serializers.IntegerField()
    groups = FailureGroupSerializer(many=True)


class BaselineRequestSerializer(serializers.Serializer):
    baseline = serializers.BooleanField(
        default=True, help_text="true marks the batch as its suites' baseline; false unmarks it."
    )


class BaselineSerializer(serializers.Serializer):
    batch = serializers.IntegerField()
    is_baseline = serializers.BooleanField()
    suites = serializers.ListField(child=serializers.CharField())


# --- reading the request ------------------------------------------------------------------------


def _batch(request: Request, raw: Any, name: str = "id") -> Batch:
    """One of the user's batches by id (a path or query value), else 404; a number beyond 64
    bits is a 400."""
    try:
        number = query_numbers.whole_number(name, str(raw))
    except query_numbers.NumberOutOfRange as exc:
        raise ValidationError({name: str(exc)}) from None
    except ValueError:
        raise ValidationError(
            {name: f"{name} must be a whole number, not {query_numbers.shown(str(raw))}."}
        ) from None
    batch = access.batches_for(request.user).filter(pk=number).first()
    if batch is None:
        # Which value named it (compare takes two); the same words whether the batch is
        # another organization's or does not exist, so nothing is learnt of the others.
        raise NotFound(f"{name}: there is no batch {number} among your organizations' batches.")
    return batch


def _merged(request: Request) -> bool:
    raw = request.query_params.get("trials", "latest")
    if raw not in ("latest", "batch"):
        raise ValidationError({"trials": "trials must be latest (with reruns) or batch (alone)."})
    return raw == "latest"


TRIALS = OpenApiParameter(
    "trials",
    str,
    enum=["latest", "batch"],
    description="latest (default): each batch read with its reruns, the latest trials per "
    "cell; batch: each batch alone.",
)


# --- endpoints ------------------------------------------------------------------------------------


@extend_schema(
    summary="Batches with pass rate, trial counts, cost and duration, filtered",
    parameters=[
        OpenApiParameter("suite", str, description="Only batches that ran this suite (slug)."),
        OpenApiParameter("label", str, description="Only batches whose label contains this."),
        OpenApiParameter("status", str, enum=list(Batch.Status.values)),
        OpenApiParameter("who", str, description="Only batches started by this username."),
        OpenApiParameter("since", OpenApiTypes.DATE, description="Started on or after this day."),
        OpenApiParameter("until", OpenApiTypes.DATE, description="Started on or before this day."),
        OpenApiParameter("cursor", str, description="A page's position, from next or previous."),
    ],
    responses={200: BatchSummaryPageSerializer},
)
@api_view(["GET"])
def batch_summaries_view(request: Request) -> Response:
    try:
        filters = BatchFilters.from_query(request.query_params)
    except BadBatchFilter as exc:
        raise ValidationError({"filter": str(exc)}) from None
    paginator = KeysetPagination()
    page = paginator.paginate_queryset(filtered_batches(request.user, filters), request)
    rows = [
        {
            "id": line.batch.pk,
            "created_at": line.batch.created_at,
            "finished_at": line.batch.finished_at,
            "created_by": line.batch.created_by.get_username() if line.batch.created_by else None,
            "label": line.batch.label,
            "status": line.batch.status,
            "suites": line.suites,
            "parent": line.batch.parent_id,
            "is_baseline": line.batch.is_baseline,
            "trial_counts": line.counts,
            "pass_rate": line.pass_rate,
            "cost_usd": line.cost_usd,
            "cost_per_passed_trial_usd": line.cost_per_pass,
            "duration_ms": line.duration_ms,
        }
        for line in summarize(list(page or []))
    ]
    return paginator.get_paginated_response(BatchSummarySerializer(rows, many=True).data)


@extend_schema(
    summary="Compare batch B with batch A, or with the baseline of B's suite",
    description="Per cell and per variant: pass rates with 95% Wilson intervals, the difference "
    "B - A with its 95% Newcombe interval, regressions first; per variant the exact McNemar "
    "test on per-case outcomes; the headline; and the comparability warnings, by name.",
    parameters=[
        OpenApiParameter(
            "a", str, required=True, description="A batch id, or baseline (the suite's baseline)."
        ),
        OpenApiParameter("b", int, required=True, description="The batch measured."),
        OpenApiParameter(
            "suite", str, description="With a=baseline: whose baseline (default: B's first suite)."
        ),
        TRIALS,
    ],
    responses={200: ComparisonSerializer},
)
@api_view(["GET"])
def compare_view(request: Request) -> Response:
    params = request.query_params
    if not params.get("b"):
        raise ValidationError({"b": "b is required: the id of the batch measured."})
    if not params.get("a"):
        raise ValidationError({"a": "a is required: a batch id, or baseline."})
    merged = _merged(request)
    b = _batch(request, params["b"], "b")
    if params["a"] == "baseline":
        slugs = [params["suite"]] if params.get("suite") else b.suite_slugs()
        a = next((found for slug in slugs if (found := suite_baseline(b.organization, slug))), None)
        if a is None:
            raise ValidationError(
                {"a": f"No batch is marked as the baseline of {', '.join(slugs) or 'its suite'}."}
            )
    else:
        a = _batch(request, params["a"], "a")
    return Response(compare_batches(a, b, merged=merged).to_dict())


def _estimates(n: int, c: int, ks: range) -> list[dict[str, Any]]:
    return [
        {
            "k": k,
            "pass_at_k": round(pass_at_k(n, c, k), 6),
            "pass_hat_k": round(pass_hat_k(n, c, k), 6),
        }
        for k in ks
    ]


@extend_schema(
    summary="pass@k and pass^k per cell and per variant of a batch",
    description="Unbiased estimators from each cell's n finished trials: pass@k = 1 - C(n-c, k)"
    " / C(n, k), pass^k = C(c, k) / C(n, k), for k = 1..n (or the k asked).",
    parameters=[
        OpenApiParameter(
            "k", int, description="Only this k (cells with fewer trials are left out)."
        ),
        TRIALS,
    ],
    responses={200: PassAtKSerializer},
)
@api_view(["GET"])
def pass_at_k_view(request: Request, pk: int) -> Response:
    batch = _batch(request, pk)
    merged = _merged(request)
    wanted = None
    if request.query_params.get("k"):
        raw = request.query_params["k"]
        try:
            wanted = query_numbers.whole_number("k", raw)
        except (ValueError, query_numbers.NumberOutOfRange):
            wanted = 0
        if wanted < 1 or wanted > 10_000:
            raise ValidationError(
                {"k": f"k must be a whole number from 1, not {query_numbers.shown(raw)}."}
            )
    cells = []
    per_variant: dict[str, list[tuple[int, int]]] = {}
    for (suite, case, variant), rows in batch_cells(batch, merged=merged).items():
        finished = [r for r in rows if r.is_final]
        n, c = len(finished), sum(1 for r in finished if r.passed)
        if n == 0 or (wanted is not None and n < wanted):
            continue
        ks = range(wanted, wanted + 1) if wanted else range(1, n + 1)
        cells.append(
            {
                "suite": suite,
                "case": case,
                "case_version": rows[-1].case_version,
                "variant": variant,
                "n": n,
                "c": c,
                "estimates": _estimates(n, c, ks),
            }
        )
        per_variant.setdefault(variant, []).append((n, c))
    variants = []
    for name, counts in sorted(per_variant.items()):
        reach = min(n for n, _ in counts)
        ks = range(wanted, wanted + 1) if wanted else range(1, reach + 1)
        variants.append(
            {
                "variant": name,
                "cells": len(counts),
                "estimates": [
                    {
                        "k": k,
                        "pass_at_k": round(
                            sum(pass_at_k(n, c, k) for n, c in counts) / len(counts), 6
                        ),
                        "pass_hat_k": round(
                            sum(pass_hat_k(n, c, k) for n, c in counts) / len(counts), 6
                        ),
                    }
                    for k in ks
                ],
            }
        )
    body = {
        "batch": batch.pk,
        "merged": merged,
        "method": "unbiased estimators (Chen et al. 2021 for pass@k; Yao et al. 2024 for pass^k)",
        "cells": cells,
        "variants": variants,
    }
    return Response(PassAtKSerializer(body).data)


@extend_schema(
    summary="Variant against variant within a batch",
    description="Per variant: the mean over cases of each case's mean trial score (pass = 1, or "
    "the weighted score) with a 95% interval from the case-clustered standard error, and pass@k "
    "and pass^k. Per pair (A, B): the mean paired per-case difference B - A over the cases both "
    "ran with its 95% interval (holds when it excludes 0), the exact McNemar test on per-case "
    "majority outcomes, the cases by difference, and the power: the minimum detectable "
    "difference at 80% power and the trials per case (or cases) ``difference`` needs.",
    parameters=[
        OpenApiParameter(
            "variants",
            str,
            many=True,
            description="Two or more variant names, in the order A, B (default: every variant).",
        ),
        OpenApiParameter(
            "difference",
            float,
            description="The difference the power line plans for, 0-1 "
            f"(default {DEFAULT_DIFFERENCE}).",
        ),
        TRIALS,
    ],
    responses={200: OpenApiTypes.OBJECT},
)
@api_view(["GET"])
def variant_compare_view(request: Request, pk: int) -> Response:
    batch = _batch(request, pk)
    merged = _merged(request)
    names = request.query_params.getlist("variants")
    if len(names) == 1:
        raise ValidationError({"variants": "variants needs two names or more (or none for all)."})
    raw = request.query_params.get("difference", "")
    difference = DEFAULT_DIFFERENCE
    if raw:
        try:
            difference = float(raw)
        except ValueError:
            difference = -1.0
        if not 0 < difference < 1:
            raise ValidationError(
                {
                    "difference": f"difference must be between 0 and 1, not {query_numbers.shown(raw)}."
                }
            )
    try:
        comparison = compare_variants(batch, names or None, merged=merged, difference=difference)
    except UnknownVariant as exc:
        raise ValidationError({"variants": f"{str(exc)[0].upper()}{str(exc)[1:]}."}) from None
    return Response(comparison.to_dict())


@extend_schema(
    summary="Judges against people's labels, and the labels",
    description="Per organization of the reader: each model judge (rubric x model) against the "
    "organization's trial labels, with n, Cohen's kappa, the true positive and true negative "
    "rates and the confusion matrix (flagged: kappa below 0.6 on 20 labels or more); and the "
    "labels themselves. With batch: that batch's organization, and the labels of that batch.",
    parameters=[OpenApiParameter("batch", int, description="Only this batch's labels.")],
    responses={200: OpenApiTypes.OBJECT},
)
@api_view(["GET"])
def judges_view(request: Request) -> Response:
    scopes: list[tuple[Any, list[int] | None]]
    if request.query_params.get("batch"):
        batch = _batch(request, request.query_params["batch"], "batch")
        scopes = [(batch.organization, [batch.pk])]
    else:
        scopes = [(org, None) for org in access.organizations_of(request.user).order_by("slug")]
    return Response(
        {
            "organizations": [
                {
                    "organization": org.slug,
                    "judges": [j.to_dict() for j in judge_agreements(org)],
                    "labels": exported_labels(org, batch_ids=batch_ids),
                }
                for org, batch_ids in scopes
            ]
        }
    )


@extend_schema(
    summary="The flaky cells of a batch, each with its outcomes batch by batch",
    description="A cell (case version x variant) is flaky when its graded trials disagree, "
    "within this batch or across the batches that ran the same case version and variant.",
    responses={200: FlakyListSerializer},
)
@api_view(["GET"])
def batch_flaky_view(request: Request, pk: int) -> Response:
    batch = _batch(request, pk)
    return Response({"cells": [h.to_dict() for h in flaky_cells(batch).values()]})


@extend_schema(
    summary="A batch's failed and errored trials grouped by cause, the largest group first",
    description="A failed trial's cause is its first failing check's message, an errored "
    "trial's its error; trials share a group when the message agrees once paths, ids, hex and "
    "numbers are taken out.",
    responses={200: FailureGroupsSerializer},
)
@api_view(["GET"])
def batch_failures_view(request: Request, pk: int) -> Response:
    batch = _batch(request, pk)
    groups = [
        {
            **group.to_dict(),
            "urls": [
                request.build_absolute_uri(reverse("trial", args=[t])) for t in group.trial_ids
            ],
        }
        for group in failure_groups(batch)
    ]
    return Response(FailureGroupsSerializer({"batch": batch.pk, "groups": groups}).data)


@extend_schema(
    summary="The flaky cells of a suite over all its batches, most uncertain first",
    responses={200: FlakyListSerializer},
)
@api_view(["GET"])
def suite_flaky_view(request: Request, pk: int) -> Response:
    try:
        number = query_numbers.whole_number("id", str(pk))
    except (ValueError, query_numbers.NumberOutOfRange):
        raise Http404 from None  # no suite has such an id
    suite = access.suites_for(request.user).select_related("organization").filter(pk=number).first()
    if suite is None:
        raise Http404
    return Response({"cells": [h.to_dict() for h in flaky_list(suite.organization, suite.slug)]})


def _cost_dict(summary: CostSummary) -> dict[str, Any]:
    return summary.to_dict()


def _summary(rows: list[TrialRow]) -> CostSummary:
    return summarize_costs([r.cost_usd for r in rows], sum(1 for r in rows if r.passed))


@extend_schema(
    summary="What a batch cost: in all, per variant, per cell, and per passed trial",
    description="USD: the harness-reported cost, or usage x the price table; trials of unknown "
    "cost are counted apart (costed_trials), never as $0.",
    parameters=[TRIALS],
    responses={200: BatchCostSerializer},
)
@api_view(["GET"])
def batch_cost_view(request: Request, pk: int) -> Response:
    batch = _batch(request, pk)
    merged = _merged(request)
    cells = batch_cells(batch, merged=merged)
    everything = [row for rows in cells.values() for row in rows]
    by_variant: dict[str, list[TrialRow]] = {}
    for row in everything:
        by_variant.setdefault(row.variant, []).append(row)
    total = _summary(everything) if merged else batch_cost(batch)
    body = {
        "batch": batch.pk,
        "merged": merged,
        "total": _cost_dict(total),
        "variants": [
            {"variant": name, **_cost_dict(_summary(rows))}
            for name, rows in sorted(by_variant.items())
        ],
        "cells": [
            {"suite": suite, "case": case, "variant": variant, **_cost_dict(_summary(rows))}
            for (suite, case, variant), rows in cells.items()
        ],
    }
    return Response(BatchCostSerializer(body).data)


@extend_schema(
    summary="Mark a batch as the baseline of its suites (or unmark it)",
    request=BaselineRequestSerializer,
    responses={200: BaselineSerializer},
)
@api_view(["POST"])
def mark_baseline_view(request: Request, pk: int) -> Response:
    batch = _batch(request, pk)
    body = BaselineRequestSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    if body.validated_data["baseline"]:
        batch.mark_baseline()
    else:
        batch.unmark_baseline()
    return Response(
        {"batch": batch.pk, "is_baseline": batch.is_baseline, "suites": batch.suite_slugs()}
    )
