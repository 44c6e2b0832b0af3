"""The metrics page: each weighted assertion's metric per variant of a batch (pass rate, mean
score, weight), under each variant's mean weighted score and how many trials met their
threshold."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render

from dashboard.access import batches_for, get_or_404
from dashboard.views import HtmxHttpRequest
from evals_app.assertion_metrics import batch_metrics


@login_required
def batch_metrics_view(request: HtmxHttpRequest, batch_id: int) -> HttpResponse:
    batch = get_or_404(batches_for(request.user), pk=batch_id)
    metrics = batch_metrics(batch)
    context = {
        "batch": batch,
        "metrics": metrics,
        "any_threshold": any(score.held_to_threshold for score in metrics.variants),
    }
    return render(request, "dashboard/metrics.html", context)
