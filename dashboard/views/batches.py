"""The batches page: every batch of the reader's organizations, newest first, filtered and
paginated, with links to each grid and to compare; and the "mark as baseline" action."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from dashboard.access import batches_for, get_or_404, organizations_of, suites_for
from dashboard.batch_filters import BadBatchFilter, BatchFilters, filtered_batches, summarize
from dashboard.views import HtmxHttpRequest, int_param
from evals_app.models import Batch

BATCHES_PER_PAGE = 25


@login_required
def batch_list(request: HtmxHttpRequest) -> HttpResponse:
    try:
        filters = BatchFilters.from_query(request.GET)
    except BadBatchFilter as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    paginator = Paginator(filtered_batches(request.user, filters), BATCHES_PER_PAGE)
    page = paginator.get_page(int_param(request, "page", 1))
    kept = filters.as_query()
    context = {
        "page": page,
        "summaries": summarize(list(page.object_list)),
        "filters": filters,
        "filtered": bool(kept),
        "statuses": Batch.Status.choices,
        "suite_options": list(
            suites_for(request.user).order_by("slug").values_list("slug", "name").distinct()
        ),
        "who_options": list(
            get_user_model()
            .objects.filter(organizations__in=organizations_of(request.user))
            .order_by("username")
            .values_list("username", flat=True)
            .distinct()
        ),
        "page_query": urlencode(kept),
    }
    template = "dashboard/batches.html"
    if request.htmx and request.htmx.target == "batches":
        template += "#batches"
    return render(request, template, context)


@login_required
@require_POST
def mark_baseline_view(request: HtmxHttpRequest, batch_id: int) -> HttpResponse:
    """Make the batch the baseline of every suite it ran (or, with ``unmark``, stop it being
    one), then go back to where the reader was."""
    batch = get_or_404(batches_for(request.user), pk=batch_id)
    if request.POST.get("unmark"):
        batch.unmark_baseline()
        messages.success(request, f"Batch #{batch.pk} is no longer a baseline.")
    else:
        batch.mark_baseline()
        suites = ", ".join(batch.suite_slugs()) or "no suite"
        messages.success(request, f"Batch #{batch.pk} is now the baseline of {suites}.")
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = reverse("batches")
    return HttpResponseRedirect(back)
