"""A batch's failed and errored trials grouped by cause (issue 32): its own page, and the
short version the grid loads under its table."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render

from dashboard.access import batches_for, get_or_404
from dashboard.views import HtmxHttpRequest
from evals_app.failure_groups import failure_groups

# The grid's summary links this many trials of a group; the page links every one.
SUMMARY_TRIALS = 12


@login_required
def batch_failures_view(request: HtmxHttpRequest, batch_id: int) -> HttpResponse:
    """The causes of failure, largest group first, each linking to its trials. ?summary=1
    serves the card the grid loads (a few trials linked per group)."""
    batch = get_or_404(batches_for(request.user), pk=batch_id)
    summary = request.GET.get("summary") == "1"
    groups = failure_groups(batch)
    shown = SUMMARY_TRIALS if summary else None
    context = {
        "batch": batch,
        "summary": summary,
        "groups": [
            (group, group.trial_ids[:shown], group.count - len(group.trial_ids[:shown]))
            for group in groups
        ],
    }
    if summary:
        return render(request, "dashboard/failures.html#failure_groups", context)
    return render(request, "dashboard/failures.html", context)
