"""Rerun buttons: each POST makes a new batch linked to the one it came from, queues it, and
sends the browser to the new batch's grid, where its cells fill in live.

A rerun the CLI would refuse (a case needing a model endpoint this server lacks) starts nothing:
the browser goes back to the page it came from, which shows the CLI's sentence."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from dashboard.access import batches_for, cases_for, get_or_404, runs_for, trials_for
from dashboard.throttling import rerun_rate_limited
from dashboard.views import HtmxHttpRequest
from evals_app.models import Batch, Trial
from runner.batches.planning import InvalidInput
from runner.batches.regrade import regrade_batch
from runner.batches.reruns import (
    RETRYABLE,
    rerun_batch,
    rerun_case,
    rerun_errored,
    rerun_failed,
    rerun_run,
    rerun_trial,
)
from runner.batches.submission import SubmissionError
from runner.jobs.dispatch import enqueue


def _follow(request: HtmxHttpRequest, url: str) -> HttpResponse:
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return HttpResponseRedirect(url)


def _to_new_batch(request: HtmxHttpRequest, batch: Batch) -> HttpResponse:
    return _follow(request, reverse("batch", args=[batch.pk]))


def _back(request: HtmxHttpRequest, fallback: str) -> str:
    """The page the button was on, when it is one of ours; else ``fallback``."""
    referer = request.headers.get("referer", "")
    safe = url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return referer if referer and safe else fallback


def _refused(request: HtmxHttpRequest, refusal: InvalidInput, fallback: str) -> HttpResponse:
    for problem in refusal.problems:
        messages.error(request, f"Not rerun: {problem}.")
    return _follow(request, _back(request, fallback))


@login_required
@require_POST
@rerun_rate_limited
def rerun_batch_view(request: HtmxHttpRequest, batch_id: int) -> HttpResponse:
    batch = get_or_404(batches_for(request.user), pk=batch_id)
    try:
        return _to_new_batch(request, rerun_batch(batch, user=request.user))
    except InvalidInput as refusal:
        return _refused(request, refusal, reverse("batch", args=[batch.pk]))


def _rerun_some(
    request: HtmxHttpRequest, batch_id: int, statuses, rerun, nothing: str
) -> HttpResponse:
    """Rerun the trials of a batch that ended in one of ``statuses``; with none, say
    ``nothing`` (a sentence about the batch) and start nothing."""
    batch = get_or_404(batches_for(request.user), pk=batch_id)
    here = reverse("batch", args=[batch.pk])
    if not Trial.objects.filter(run__batch=batch, status__in=statuses).exists():
        messages.info(request, f"Nothing to rerun: batch {batch.pk} has no {nothing}.")
        return _follow(request, here)
    try:
        return _to_new_batch(request, rerun(batch, user=request.user))
    except InvalidInput as refusal:
        return _refused(request, refusal, here)


@login_required
@require_POST
@rerun_rate_limited
def rerun_failed_view(request: HtmxHttpRequest, batch_id: int) -> HttpResponse:
    return _rerun_some(
        request, batch_id, RETRYABLE, rerun_failed, "failed, errored or timed-out trial"
    )


@login_required
@require_POST
@rerun_rate_limited
def rerun_errored_view(request: HtmxHttpRequest, batch_id: int) -> HttpResponse:
    return _rerun_some(request, batch_id, [Trial.Status.ERRORED], rerun_errored, "errored trial")


@login_required
@require_POST
@rerun_rate_limited
def rerun_run_view(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    run = get_or_404(
        runs_for(request.user).select_related("batch", "case_version__case", "variant"), pk=run_id
    )
    try:
        return _to_new_batch(request, rerun_run(run, user=request.user))
    except InvalidInput as refusal:
        return _refused(request, refusal, reverse("run", args=[run.pk]))


@login_required
@require_POST
@rerun_rate_limited
def rerun_case_view(request: HtmxHttpRequest, batch_id: int, case_id: int) -> HttpResponse:
    batch = get_or_404(batches_for(request.user), pk=batch_id)
    # Only a case this batch ran has a row to rerun.
    case = get_or_404(
        cases_for(request.user).filter(versions__runs__batch=batch).distinct(), pk=case_id
    )
    try:
        return _to_new_batch(request, rerun_case(batch, case, user=request.user))
    except InvalidInput as refusal:
        return _refused(request, refusal, reverse("batch", args=[batch.pk]))


@login_required
@require_POST
@rerun_rate_limited
def rerun_trial_view(request: HtmxHttpRequest, trial_id: int) -> HttpResponse:
    trial = get_or_404(
        trials_for(request.user).select_related(
            "run__batch", "run__case_version__case", "run__variant"
        ),
        pk=trial_id,
    )
    try:
        return _to_new_batch(request, rerun_trial(trial, user=request.user))
    except InvalidInput as refusal:
        return _refused(request, refusal, reverse("trial", args=[trial.pk]))


@login_required
@require_POST
@rerun_rate_limited
def regrade_batch_view(request: HtmxHttpRequest, batch_id: int) -> HttpResponse:
    """Run the current eval file's checks on the batch's stored trials, with no agent run (the
    eval file is read from where the batch's eval was, on this server)."""
    batch = get_or_404(batches_for(request.user), pk=batch_id)
    here = reverse("batch", args=[batch.pk])
    try:
        with transaction.atomic():
            regrade, trial_ids, skipped = regrade_batch(batch, user=request.user)
            transaction.on_commit(lambda: enqueue(trial_ids))
    except (InvalidInput, SubmissionError) as refusal:
        for problem in refusal.problems:
            messages.error(request, f"Not re-graded: {problem}.")
        return _follow(request, _back(request, here))
    for line in skipped:
        messages.warning(request, line)
    return _to_new_batch(request, regrade)
