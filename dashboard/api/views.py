"""The REST API: read-only endpoints over what a user's organizations defined and ran, and
POST actions that start reruns.

Every queryset starts from ``dashboard.access``, so another organization's object is simply
not found (404) and never listed. Filters are plain query parameters; a malformed one answers
400 with one sentence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import connection
from django.db.models import Count, Prefetch, Q, QuerySet, Sum
from django.db.models.functions import Coalesce
from django.http import HttpRequest, JsonResponse
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response

from dashboard import access, query_numbers
from dashboard.api import serializers
from dashboard.api.rerun_refusals import RerunRefusalMixin
from dashboard.throttling import RerunRateThrottle, RerunThrottledMixin
from evals_app.models import Batch, CaseVersion, Event, Run

TOO_MANY_RERUNS = OpenApiResponse(
    description="More reruns than PROCTOR_RERUN_RATE allows this user; see Retry-After."
)


def _count_trials_by_status(batches: QuerySet[Batch]) -> QuerySet[Batch]:
    """Annotate each batch with one count per trial status, added up from its runs' counts
    (one aggregate query, no N+1)."""
    return batches.annotate(
        **{
            serializers.trial_count_name(status): Coalesce(
                Sum(f"runs__{serializers.trial_count_name(status)}"), 0
            )
            for status in serializers.TRIAL_STATUSES
        }
    )


def _whole_number(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        return query_numbers.whole_number(name, raw)
    except query_numbers.NumberOutOfRange as exc:
        raise ValidationError({name: str(exc)}) from None
    except ValueError:
        raise ValidationError(
            {name: f"{name} must be a whole number, not {query_numbers.shown(raw)}."}
        ) from None


def _trial_status(request: Request) -> str | None:
    raw = request.query_params.get("status")
    if raw and raw not in serializers.TRIAL_STATUSES:
        raise ValidationError(
            {"status": f"status must be one of {', '.join(serializers.TRIAL_STATUSES)}."}
        )
    return raw or None


def _cases_tagged(queryset: QuerySet, tag: str) -> QuerySet:
    """Cases whose tags list holds ``tag``.

    SQLite has no JSON containment lookup, so there the tags are read and matched in Python
    (one extra query over the id and tags columns only).
    """
    if connection.features.supports_json_field_contains:
        return queryset.filter(tags__contains=[tag])
    ids = [case_id for case_id, tags in queryset.values_list("id", "tags") if tag in (tags or [])]
    return queryset.filter(id__in=ids)


def _batches_for(user) -> QuerySet[Batch]:
    batches = access.batches_for(user).select_related("organization", "created_by")
    return _count_trials_by_status(batches).annotate(run_count=Count("runs"))


def _attach_batch_counts(batches: list[Batch]) -> None:
    """Set what ``_batches_for`` annotates on a page of batches, in one grouped query over
    those batches' runs, which count their trials: counting in the list query itself would
    join every run of every batch before the page was cut, and make the pagination's COUNT
    do it again."""
    names = [serializers.trial_count_name(status) for status in serializers.TRIAL_STATUSES]
    counts: dict[int, Mapping[str, Any]] = {
        row["batch_id"]: row
        for row in Run.objects.filter(batch_id__in=[batch.pk for batch in batches])
        .order_by()
        .values("batch_id")
        .annotate(run_count=Count("id"), **{name: Sum(name) for name in names})
    }
    for batch in batches:
        row: Mapping[str, Any] = counts.get(batch.pk, {})
        for name in names:
            setattr(batch, name, row.get(name) or 0)
        batch.run_count = row.get("run_count", 0)  # type: ignore[attr-defined]


def _has_unsuccessful_trials(batch: Batch) -> bool:
    return (
        Run.objects.filter(batch=batch)
        .filter(Q(trials_failed__gt=0) | Q(trials_errored__gt=0) | Q(trials_timed_out__gt=0))
        .exists()
    )


def _created_batch(request: Request, batch: Batch) -> Response:
    """201 with the new batch, serialized like any listed batch."""
    fresh = _batches_for(request.user).get(pk=batch.pk)
    body = serializers.BatchSerializer(fresh, context={"request": request}).data
    location = request.build_absolute_uri(reverse("api-batch-detail", args=[batch.pk]))
    return Response(body, status=status.HTTP_201_CREATED, headers={"Location": location})


@extend_schema_view(list=extend_schema(summary="Suites of your organizations"))
class SuiteViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = serializers.SuiteSerializer

    def get_queryset(self):
        return (
            access.suites_for(self.request.user)
            .select_related("organization")
            .annotate(case_count=Count("cases"))
            .order_by("organization_id", "slug")
        )


@extend_schema_view(
    list=extend_schema(
        summary="Cases with their versions",
        parameters=[
            OpenApiParameter("suite", str, description="Only cases of the suite with this slug."),
            OpenApiParameter("tag", str, description="Only cases carrying this tag."),
            OpenApiParameter(
                "search", str, description="Cases whose slug or name contains this text."
            ),
        ],
    )
)
class CaseViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = serializers.CaseSerializer

    def get_queryset(self):
        versions = CaseVersion.objects.only(
            "id", "case_id", "number", "definition_hash", "created_at"
        )
        cases = (
            access.cases_for(self.request.user)
            .select_related("organization", "suite")
            .prefetch_related(Prefetch("versions", queryset=versions.order_by("number")))
            .order_by("organization_id", "slug")
        )
        if self.action != "list":
            return cases
        params = self.request.query_params
        if params.get("suite"):
            cases = cases.filter(suite__slug=params["suite"])
        if params.get("search"):
            cases = cases.filter(
                Q(slug__icontains=params["search"]) | Q(name__icontains=params["search"])
            )
        if params.get("tag"):
            cases = _cases_tagged(cases, params["tag"])
        return cases


@extend_schema_view(
    list=extend_schema(
        summary="Case versions (definitions; sources on the detail endpoint)",
        parameters=[
            OpenApiParameter("case", str, description="Only versions of the case with this slug.")
        ],
    ),
    retrieve=extend_schema(summary="One case version with its captured sources and changes"),
)
class CaseVersionViewSet(viewsets.ReadOnlyModelViewSet):
    def get_serializer_class(self):
        if self.action == "retrieve":
            return serializers.CaseVersionDetailSerializer
        return serializers.CaseVersionSerializer

    def get_queryset(self):
        versions = access.case_versions_for(self.request.user).select_related("case")
        if self.action == "list":
            # The captured sources can be large; only the detail endpoint carries them.
            versions = versions.defer("sources")
            if self.request.query_params.get("case"):
                versions = versions.filter(case__slug=self.request.query_params["case"])
        return versions.order_by("case__organization_id", "case__slug", "number")


class VariantViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = serializers.VariantSerializer

    def get_queryset(self):
        return (
            access.variants_for(self.request.user)
            .select_related("organization")
            .order_by("name", "id")
        )


@extend_schema_view(
    list=extend_schema(
        summary="Batches, newest first, with trial counts per status",
        parameters=[
            OpenApiParameter(
                "status",
                str,
                enum=list(Batch.Status.values),
                description="Only batches in this status.",
            )
        ],
    )
)
class BatchViewSet(RerunRefusalMixin, RerunThrottledMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = serializers.BatchSerializer

    def get_queryset(self):
        if self.action == "list" and self.paginator is not None:
            # Counted per page instead (paginate_queryset).
            batches = access.batches_for(self.request.user).select_related(
                "organization", "created_by"
            )
        else:
            batches = _batches_for(self.request.user)
        batches = batches.order_by("-created_at", "-id")
        wanted = self.request.query_params.get("status") if self.action == "list" else None
        if wanted:
            if wanted not in Batch.Status.values:
                raise ValidationError(
                    {"status": f"status must be one of {', '.join(Batch.Status.values)}."}
                )
            batches = batches.filter(status=wanted)
        return batches

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        if page is not None:
            _attach_batch_counts(page)
        return page

    @extend_schema(
        summary="Rerun a batch: every run, only its failed, errored and timed-out trials, or only its errored ones",
        request=serializers.RerunBatchRequestSerializer,
        responses={201: serializers.BatchSerializer, 429: TOO_MANY_RERUNS},
    )
    @action(detail=True, methods=["post"], throttle_classes=[RerunRateThrottle])
    def rerun(self, request: Request, pk: str | None = None) -> Response:
        batch = self.get_object()
        body = serializers.RerunBatchRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        scope = body.validated_data["scope"]
        if scope == "failed" and not _has_unsuccessful_trials(batch):
            raise ValidationError(
                {"scope": f"Batch {batch.pk} has no failed, errored or timed-out trials to rerun."}
            )
        if scope == "errored" and not batch.runs.filter(trials_errored__gt=0).exists():
            raise ValidationError({"scope": f"Batch {batch.pk} has no errored trials to rerun."})
        from runner.batches import reruns  # the runner brings Celery and the harnesses: load on use

        if scope == "failed":
            new_batch = reruns.rerun_failed(batch, user=request.user)
        elif scope == "errored":
            new_batch = reruns.rerun_errored(batch, user=request.user)
        else:
            new_batch = reruns.rerun_batch(batch, user=request.user)
        return _created_batch(request, new_batch)

    @extend_schema(
        summary="Rerun one case of a batch under every variant (one grid row)",
        request=serializers.RerunCaseRequestSerializer,
        responses={201: serializers.BatchSerializer, 429: TOO_MANY_RERUNS},
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="rerun-case",
        throttle_classes=[RerunRateThrottle],
    )
    def rerun_case(self, request: Request, pk: str | None = None) -> Response:
        batch = self.get_object()
        body = serializers.RerunCaseRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        slug = body.validated_data["case"]
        case = (
            access.cases_for(request.user)
            .filter(organization=batch.organization_id, slug=slug)
            .first()
        )
        if case is None or not batch.runs.filter(case_version__case=case).exists():
            raise ValidationError({"case": f"Batch {batch.pk} has no runs of case {slug!r}."})
        from runner.batches import reruns  # the runner brings Celery and the harnesses: load on use

        return _created_batch(request, reruns.rerun_case(batch, case, user=request.user))


@extend_schema_view(
    list=extend_schema(
        summary="Runs (one case version under one variant) with trial counts",
        parameters=[
            OpenApiParameter("batch", int, description="Only runs of this batch."),
            OpenApiParameter("variant", int, description="Only runs of this variant."),
            OpenApiParameter("case", str, description="Only runs of the case with this slug."),
        ],
    )
)
class RunViewSet(RerunRefusalMixin, RerunThrottledMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = serializers.RunSerializer

    def get_queryset(self):
        runs = (
            access.runs_for(self.request.user)
            .select_related("case_version__case", "variant")
            # A run shows its version's number only; definitions and sources are large.
            .defer("case_version__definition", "case_version__sources")
            .order_by("batch_id", "id")
        )
        # Each run counts its own trials by status (the trials_<status> fields).
        if self.action != "list":
            return runs
        batch_id = _whole_number(self.request, "batch")
        if batch_id is not None:
            runs = runs.filter(batch_id=batch_id)
        variant_id = _whole_number(self.request, "variant")
        if variant_id is not None:
            runs = runs.filter(variant_id=variant_id)
        if self.request.query_params.get("case"):
            runs = runs.filter(case_version__case__slug=self.request.query_params["case"])
        return runs

    @extend_schema(
        summary="Rerun one run (one grid cell) as a new batch",
        request=None,
        responses={201: serializers.BatchSerializer, 429: TOO_MANY_RERUNS},
    )
    @action(detail=True, methods=["post"], throttle_classes=[RerunRateThrottle])
    def rerun(self, request: Request, pk: str | None = None) -> Response:
        run = self.get_object()
        from runner.batches import reruns  # the runner brings Celery and the harnesses: load on use

        return _created_batch(request, reruns.rerun_run(run, user=request.user))


class EventPagination(PageNumberPagination):
    """A transcript can hold many thousand events: pages of 500 unless asked otherwise."""

    page_size = 500
    page_size_query_param = "page_size"
    max_page_size = 5000


@extend_schema_view(
    list=extend_schema(
        summary="Trials with their checks",
        parameters=[
            OpenApiParameter("run", int, description="Only trials of this run."),
            OpenApiParameter("batch", int, description="Only trials of this batch."),
            OpenApiParameter(
                "status",
                str,
                enum=list(serializers.TRIAL_STATUSES),
                description="Only trials in this status.",
            ),
        ],
    ),
    retrieve=extend_schema(summary="One trial with its checks and turns"),
)
class TrialViewSet(viewsets.ReadOnlyModelViewSet):
    def get_serializer_class(self):
        if self.action == "retrieve":
            return serializers.TrialDetailSerializer
        if self.action == "events":
            return serializers.EventSerializer
        return serializers.TrialSerializer

    def get_queryset(self):
        trials = (
            access.trials_for(self.request.user).select_related("run").order_by("run_id", "index")
        )
        if self.action == "events":
            return trials
        trials = trials.prefetch_related("checks")
        if self.action == "retrieve":
            return trials.prefetch_related("turns", "consultations")
        run_id = _whole_number(self.request, "run")
        if run_id is not None:
            trials = trials.filter(run_id=run_id)
        batch_id = _whole_number(self.request, "batch")
        if batch_id is not None:
            trials = trials.filter(run__batch_id=batch_id)
        wanted = _trial_status(self.request)
        if wanted:
            trials = trials.filter(status=wanted)
        return trials

    @extend_schema(
        summary="A trial's events in order, paginated",
        parameters=[
            OpenApiParameter(
                "kind", str, enum=list(Event.Kind.values), description="Only events of this kind."
            ),
            OpenApiParameter(
                "after",
                OpenApiTypes.INT,
                description="Only events with a larger seq (follow a live trial).",
            ),
            OpenApiParameter(
                "page_size", OpenApiTypes.INT, description="Events per page (at most 5000)."
            ),
        ],
        responses=serializers.EventSerializer(many=True),
    )
    @action(detail=True, methods=["get"], pagination_class=EventPagination)
    def events(self, request: Request, pk: str | None = None) -> Response:
        trial = self.get_object()
        events = trial.events.order_by("seq")
        kind = request.query_params.get("kind")
        if kind:
            if kind not in Event.Kind.values:
                raise ValidationError(
                    {"kind": f"kind must be one of {', '.join(Event.Kind.values)}."}
                )
            events = events.filter(kind=kind)
        after = _whole_number(request, "after")
        if after is not None:
            events = events.filter(seq__gt=after)
        page = self.paginate_queryset(events)
        return self.get_paginated_response(serializers.EventSerializer(page, many=True).data)


@csrf_exempt  # it changes nothing; a POST to a wrong address is a 404, not a CSRF 403 page
def api_not_found(request: HttpRequest, path: str = "") -> JsonResponse:
    """Any other URL under /api/: a JSON 404 like every API error, not the site's HTML page
    (a client, and the schema, expect JSON from the API)."""
    return JsonResponse({"detail": "No API endpoint at this address."}, status=404)
