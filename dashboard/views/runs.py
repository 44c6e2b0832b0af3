"""The run page: one grid cell's trials and the checks that graded them."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone

from dashboard.access import get_or_404, runs_for
from dashboard.check_panel import CheckReport, run_check_reports
from dashboard.views import HtmxHttpRequest
from evals_app.models import Check, Run, Trial
from evals_app.pass_rates import trials_tally
from evals_app.resolution import trial_prompts


@dataclass(frozen=True)
class TrialRow:
    """A trial as the run page lists it, with the names of the checks it failed."""

    trial: Trial
    failed_checks: list[str]


def trial_rows(trials: list[Trial], reports: list[CheckReport]) -> list[TrialRow]:
    failed: dict[int, list[str]] = {}
    for report in reports:
        for check in report.results:
            if not check.passed:
                failed.setdefault(check.trial_id, []).append(report.name)
    return [TrialRow(trial, failed.get(trial.pk, [])) for trial in trials]


def trial_row(trial: Trial) -> TrialRow:
    """One row, re-read for a live update (one query)."""
    names = (
        Check.objects.filter(trial=trial, passed=False)
        .order_by("index")
        .values_list("name", flat=True)
    )
    return TrialRow(trial, list(names))


def newer_version(run: Run) -> int | None:
    """The latest version number of the run's case when it is newer than the run's (a rerun
    reruns the run's own version, which the page then says); one query."""
    latest = (
        run.case_version.case.versions.order_by("-number").values_list("number", flat=True).first()
    )
    return latest if latest and latest > run.case_version.number else None


def run_for_page(user, run_id: int) -> Run:
    return get_or_404(
        runs_for(user).select_related("batch", "case_version__case__suite", "variant"), pk=run_id
    )


@login_required
def run_detail(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    run = run_for_page(request.user, run_id)
    trials = list(run.trials.order_by("index"))
    reports = run_check_reports(run)
    # A variant carrying its own prompts ran them in place of the case's.
    prompt, system_prompt = trial_prompts(
        run.case_version.definition, (run.variant.spec or {}).get("options") or {}
    )
    context = {
        "run": run,
        "prompt": prompt,
        "system_prompt": system_prompt,
        "batch": run.batch,
        "rows": trial_rows(trials, reports),
        "tally": trials_tally(run.trials.all()),
        "reports": reports,
        "newer_version": newer_version(run),
        "rendered_at_ms": int(timezone.now().timestamp() * 1000),
    }
    return render(request, "dashboard/run.html", context)
