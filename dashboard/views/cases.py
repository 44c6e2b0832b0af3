"""The case history page: every version of a case, what changed, and how each version did
under each variant across all the batches that ran it."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Max
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.safestring import SafeString

from dashboard.access import cases_for, get_or_404
from dashboard.highlighting import highlight_code
from dashboard.trend_chart import case_trend, render_trend
from dashboard.views import HtmxHttpRequest
from evals_app.models import CaseVersion, Run, Variant
from evals_app.pass_rates import Tally, version_variant_tallies
from evals_app.version_diff import describe_changes, unified_source_diff


@dataclass
class VersionRow:
    version: CaseVersion
    changes: list[str]
    source_diff: SafeString | None
    cells: list[Tally | None]
    batch_count: int
    last_batch_id: int | None


@login_required
def case_history(request: HtmxHttpRequest, case_id: int) -> HttpResponse:
    case = get_or_404(cases_for(request.user).select_related("suite"), pk=case_id)
    versions = list(CaseVersion.objects.filter(case=case).order_by("number"))
    tallies = version_variant_tallies(case)
    variants = list(
        Variant.objects.filter(pk__in={variant for _, variant in tallies}).order_by("name", "pk")
    )
    # (how many batches ran it, the latest of them) per version
    batches: dict[int, tuple[int, int | None]] = {
        row["case_version_id"]: (row["count"], row["last"])
        for row in Run.objects.filter(case_version__case=case)
        .order_by()
        .values("case_version_id")
        .annotate(count=Count("batch_id", distinct=True), last=Max("batch_id"))
    }

    rows = []
    previous: CaseVersion | None = None
    for version in versions:
        diff = (
            unified_source_diff(previous.sources or {}, version.sources or {}) if previous else ""
        )
        batch_count, last_batch_id = batches.get(version.pk, (0, None))
        rows.append(
            VersionRow(
                version=version,
                changes=describe_changes(
                    previous.definition if previous else None, version.definition
                ),
                source_diff=highlight_code(diff, "diff") if diff else None,
                cells=[tallies.get((version.pk, variant.pk)) for variant in variants],
                batch_count=batch_count,
                last_batch_id=last_batch_id,
            )
        )
        previous = version
    rows.reverse()  # newest first: the version that runs today is what a reader wants
    trend = case_trend(case)
    context = {
        "case": case,
        "rows": rows,
        "variants": variants,
        "trend": trend,
        "trend_svg": render_trend(trend) if trend.batches else None,
    }
    return render(request, "dashboard/case_history.html", context)
