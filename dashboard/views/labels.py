"""People's labels of trials and the judges checked against them: labelling a trial (from its
page or the labelling queue), the queue that steps through a batch's unlabelled trials, and
each judge's agreement with the labels (evals_app.judge_agreement)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from dashboard.access import batches_for, get_or_404, organizations_of
from dashboard.views import HtmxHttpRequest, int_param
from dashboard.views.trials import trial_for_page
from evals_app.judge_agreement import (
    KAPPA_FLOOR,
    LABELS_NEEDED,
    flagged_judges,
    judge_agreements,
    label_trial,
    labelling_queue,
)
from evals_app.models import TrialLabel


@require_POST
@login_required
def label_trial_view(request: HtmxHttpRequest, trial_id: int) -> HttpResponse:
    """Label the trial passed or failed (``verdict``), with an optional ``note``; back to
    ``next`` (the queue) when it is one of ours, else to the trial page."""
    trial = trial_for_page(request.user, trial_id)
    verdict = request.POST.get("verdict", "")
    if verdict not in TrialLabel.Verdict.values:
        return HttpResponseBadRequest("A label is passed or failed.", content_type="text/plain")
    label_trial(trial, request.user, verdict, request.POST.get("note", ""))
    if request.htmx and request.htmx.target == "trial-label":
        return render(request, "dashboard/labels.html#trial_label", {"trial": trial})
    wanted = request.POST.get("next", "")
    safe = url_has_allowed_host_and_scheme(
        wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return redirect(wanted if wanted and safe else reverse("trial", args=[trial.pk]))


def _skipped(raw: str) -> list[int]:
    return [int(part) for part in raw.split(",") if part.isdigit() and len(part) < 19]


@login_required
def labelling_queue_view(request: HtmxHttpRequest, batch_id: int) -> HttpResponse:
    """The next unlabelled finished trial of the batch, to label with a key: p passed, f failed,
    s skip (``?skip=`` lists the trials skipped so far)."""
    batch = get_or_404(batches_for(request.user), pk=batch_id)
    skipped = _skipped(request.GET.get("skip", ""))
    trial, labelled, total = labelling_queue(batch, skipped=skipped)
    skip_query = ",".join(str(i) for i in [*skipped, *([trial.pk] if trial else [])])
    here = reverse("labelling", args=[batch.pk])
    return render(
        request,
        "dashboard/labels.html",
        {
            "batch": batch,
            "trial": trial,
            "labelled": labelled,
            "total": total,
            "skipped": len(skipped),
            "queue_url": here + (f"?skip={','.join(map(str, skipped))}" if skipped else ""),
            "skip_url": f"{here}?skip={skip_query}",
            "checks": list(trial.checks.order_by("index")) if trial else [],
        },
    )


@login_required
def judges_view(request: HtmxHttpRequest) -> HttpResponse:
    """Each judge's agreement with people's labels, per organization of the reader; with
    ``?batch=`` only the labels of that batch's organization. ``?batch=N&summary=1`` is the
    grid's note of the batch's flagged judges."""
    batch_id = int_param(request, "batch")
    if batch_id is not None:
        batch = get_or_404(batches_for(request.user), pk=batch_id)
        if request.GET.get("summary") == "1":
            return render(
                request,
                "dashboard/labels.html#flagged_judges",
                {"batch": batch, "flagged": flagged_judges(batch)},
            )
        organizations = [batch.organization]
    else:
        organizations = list(organizations_of(request.user).order_by("name"))
    return render(
        request,
        "dashboard/judges.html",
        {
            "sections": [(org, judge_agreements(org)) for org in organizations],
            "kappa_floor": KAPPA_FLOOR,
            "labels_needed": LABELS_NEEDED,
        },
    )
