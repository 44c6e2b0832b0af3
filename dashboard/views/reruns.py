"""Rerun buttons: each POST makes a new batch linked to the one it came from, queues it, and
sends the browser to the new batch's grid, where its cells fill in live."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from dashboard.access import batches_for, cases_for, get_or_404, runs_for
from dashboard.throttling import rerun_rate_limited
from dashboard.views import HtmxHttpRequest
from evals_app.models import Batch, Trial
from runner.batches.reruns import RETRYABLE, rerun_batch, rerun_case, rerun_failed, rerun_run


def _follow(request: HtmxHttpRequest, url: str) -> HttpResponse:
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return HttpResponseRedirect(url)


def _to_new_batch(request: HtmxHttpRequest, batch: Batch) -> HttpResponse:
    return _follow(request, reverse("batch", args=[batch.pk]))


@login_required
@require_POST
@rerun_rate_limited
def rerun_batch_view(request: HtmxHttpRequest, batch_id: int) -> HttpResponse:
    batch = get_or_404(batches_for(request.user), pk=batch_id)
    return _to_new_batch(request, rerun_batch(batch, user=request.user))


@login_required
@require_POST
@rerun_rate_limited
def rerun_failed_view(request: HtmxHttpRequest, batch_id: int) -> HttpResponse:
    batch = get_or_404(batches_for(request.user), pk=batch_id)
    if not Trial.objects.filter(run__batch=batch, status__in=RETRYABLE).exists():
        messages.info(
            request,
            f"Nothing to rerun: batch {batch.pk} has no failed, errored or timed-out trial.",
        )
        return _follow(request, reverse("batch", args=[batch.pk]))
    return _to_new_batch(request, rerun_failed(batch, user=request.user))


@login_required
@require_POST
@rerun_rate_limited
def rerun_run_view(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    run = get_or_404(
        runs_for(request.user).select_related("batch", "case_version__case", "variant"), pk=run_id
    )
    return _to_new_batch(request, rerun_run(run, user=request.user))


@login_required
@require_POST
@rerun_rate_limited
def rerun_case_view(request: HtmxHttpRequest, batch_id: int, case_id: int) -> HttpResponse:
    batch = get_or_404(batches_for(request.user), pk=batch_id)
    # Only a case this batch ran has a row to rerun.
    case = get_or_404(
        cases_for(request.user).filter(versions__runs__batch=batch).distinct(), pk=case_id
    )
    return _to_new_batch(request, rerun_case(batch, case, user=request.user))
