"""The compare pages: batch B measured against batch A (any two batches, or B against the
baseline of its suite), per variant and per cell, regressions first, the warnings on top; and
the variants of one batch against each other (evals_app.variant_comparison)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render

from dashboard.access import batches_for, get_or_404
from dashboard.views import HtmxHttpRequest, int_param
from evals_app.comparison import compare_batches, suite_baseline
from evals_app.models import Batch, Variant
from evals_app.variant_comparison import DEFAULT_DIFFERENCE, UnknownVariant, compare_variants

# The side A that means "the baseline of B's suite" in ?a=baseline.
BASELINE = "baseline"
PICKER_SIZE = 50
# Cells shown before "show all": regressions come first, so the rows that matter are among
# them. Every row of a 500-case, 8-variant comparison took over a second to render.
CELLS_SHOWN = 300


def _batch(request: HtmxHttpRequest, name: str) -> Batch | None:
    """The batch named by ``?<name>=<id>`` among the reader's, None when not given; another
    organization's batch, or no such batch, is a 404."""
    if not request.GET.get(name):
        return None
    number = int_param(request, name)
    if number is None:
        raise Http404
    return get_or_404(batches_for(request.user).select_related("created_by"), pk=number)


def _baseline_for(request: HtmxHttpRequest, b: Batch) -> tuple[Batch | None, str]:
    """The baseline to measure ``b`` against: that of ``?suite=`` when given, else of the first
    of b's suites that has one. Returns the batch (None when no suite has one) and the suite."""
    wanted = request.GET.get("suite", "")
    slugs = [wanted] if wanted else b.suite_slugs()
    for slug in slugs:
        baseline = suite_baseline(b.organization, slug)
        if baseline is not None and baseline.organization_id == b.organization_id:
            return baseline, slug
    return None, (slugs[0] if slugs else "")


def _recent(request: HtmxHttpRequest, *shown: Batch | None) -> list[Batch]:
    recent = list(
        batches_for(request.user).only("id", "created_at", "label", "is_baseline")[:PICKER_SIZE]
    )
    recent += [batch for batch in shown if batch is not None and batch not in recent]
    return recent


@login_required
def compare_view(request: HtmxHttpRequest) -> HttpResponse:
    b = _batch(request, "b")
    against_baseline = request.GET.get("a") == BASELINE
    a = None if against_baseline else _batch(request, "a")
    suite = ""
    if b is not None and against_baseline:
        a, suite = _baseline_for(request, b)
    merged = request.GET.get("trials", "latest") != "all"
    context: dict = {
        "a": a,
        "b": b,
        "against_baseline": against_baseline,
        "suite": suite,
        "merged": merged,
        "comparison": None,
        # The pickers offer recent batches (and the ones shown, if older).
        "recent_batches": _recent(request, a, b),
    }
    if a is not None and b is not None:
        comparison = compare_batches(a, b, merged=merged)
        shown = comparison.cells
        if request.GET.get("cells") != "all":
            shown = shown[:CELLS_SHOWN]
        everything = request.GET.copy()
        everything["cells"] = "all"
        context.update(
            comparison=comparison,
            cells=shown,
            cells_left_out=len(comparison.cells) - len(shown),
            all_cells_query=everything.urlencode(),
        )
    return render(request, "dashboard/compare.html", context)


def _difference(request: HtmxHttpRequest) -> float:
    """?difference= in percentage points (10) or as a fraction (0.1); the default otherwise."""
    try:
        value = float(request.GET.get("difference", ""))
    except ValueError:
        return DEFAULT_DIFFERENCE
    if value >= 1:
        value /= 100
    return value if 0 < value < 1 else DEFAULT_DIFFERENCE


@login_required
def variant_compare_view(request: HtmxHttpRequest, batch_id: int) -> HttpResponse:
    """Variant against variant in one batch: ?a= and ?b= name two variants (else every pair);
    ?difference= is what the power line plans for; ?trials= is batch (alone), latest (the
    default: with its reruns, the latest trials per cell) or all. ?summary=1 serves the short version the grid loads under its table."""
    batch = get_or_404(batches_for(request.user), pk=batch_id)
    names = sorted(set(Variant.objects.filter(runs__batch=batch).values_list("name", flat=True)))
    chosen = [request.GET.get("a", ""), request.GET.get("b", "")]
    picked = chosen if all(chosen) and chosen[0] != chosen[1] else None
    # The grid's modes: this batch alone, or with its reruns (the latest trials, or all).
    trials = request.GET.get("trials", "latest")
    merged = trials != "batch"
    mode = "all" if trials == "all" else "latest"
    difference = _difference(request)
    try:
        comparison = compare_variants(
            batch, picked, merged=merged, mode=mode, difference=difference
        )
    except UnknownVariant:
        raise Http404 from None
    context = {
        "batch": batch,
        "comparison": comparison,
        "names": names,
        "a": picked[0] if picked else "",
        "b": picked[1] if picked else "",
        "merged": merged,
        "trials": trials if trials in ("batch", "all") else "latest",
        "difference_points": round(difference * 100, 1),
    }
    if request.GET.get("summary") == "1":
        return render(request, "dashboard/variant_compare.html#variant_summary", context)
    return render(request, "dashboard/variant_compare.html", context)
