"""The trial page (transcript, checks, plan, verdicts, artifacts) and its artifact files."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpResponse, JsonResponse
from django.shortcuts import render

from dashboard import artifact_files
from dashboard.access import get_or_404, trials_for
from dashboard.check_panel import trial_check_reports
from dashboard.highlighting import highlight_code
from dashboard.markdown import render_markdown
from dashboard.mock_timeline import by_mock, place_in_transcript, trial_mock_calls
from dashboard.transcript_paging import last_seq, last_turn, transcript_page
from dashboard.views import HtmxHttpRequest, int_param
from dashboard.views.runs import newer_version
from evals_app.atif_trajectory import trial_trajectory as trial_trajectory_of
from evals_app.models import Trial

PLAN_PATH = "outputs/plan.md"
DIFF_PATH = "workspace.diff"


def trial_for_page(user, trial_id: int) -> Trial:
    return get_or_404(
        trials_for(user).select_related(
            "run__batch", "run__case_version__case__suite", "run__variant"
        ),
        pk=trial_id,
    )


def neighbours(trial: Trial) -> tuple[Trial | None, Trial | None, int]:
    """The trials just before and after this one in its cell (run), by index, and how many
    the cell has (one query)."""
    siblings = list(trial.run.trials.order_by("index", "id").only("id", "index", "run_id"))
    position = next(i for i, sibling in enumerate(siblings) if sibling.pk == trial.pk)
    before = siblings[position - 1] if position > 0 else None
    after = siblings[position + 1] if position + 1 < len(siblings) else None
    return before, after, len(siblings)


@login_required
def trial_detail(request: HtmxHttpRequest, trial_id: int) -> HttpResponse:
    trial = trial_for_page(request.user, trial_id)
    after = int_param(request, "after", -1)
    if "after" in request.GET:
        # A later page of a long transcript, asked for as the reader scrolls.
        page = transcript_page(
            trial,
            after=after,
            upto=int_param(request, "upto"),
            last_turn=int_param(request, "turn"),
        )
        if request.htmx:
            trailing = place_in_transcript(page, trial_mock_calls(trial))
            return render(
                request,
                "dashboard/trial.html#transcript_page",
                {"trial": trial, "page": page, "trailing_mock_calls": trailing},
            )
    else:
        page = transcript_page(trial, upto=last_seq(trial), last_turn=last_turn(trial))

    mock_calls = trial_mock_calls(trial)
    trailing_mock_calls = place_in_transcript(page, mock_calls)
    folder = artifact_files.trial_folder(trial)
    files, file_count = artifact_files.list_files(folder) if folder else ([], 0)
    plan = artifact_files.read_small_text(folder, PLAN_PATH) if folder else None
    diff = artifact_files.read_small_text(folder, DIFF_PATH) if folder else None
    previous_trial, next_trial, trial_count = neighbours(trial)
    context = {
        "previous_trial": previous_trial,
        "next_trial": next_trial,
        "trial_count": trial_count,
        "trial": trial,
        "run": trial.run,
        "batch": trial.run.batch,
        "newer_version": newer_version(trial.run),
        "page": page,
        "turns": list(trial.turns.order_by("index")),
        "reports": trial_check_reports(trial),
        "files": files,
        "file_count": file_count,
        "plan_html": render_markdown(plan) if plan is not None else None,
        "diff_html": highlight_code(diff, "diff") if diff else None,
        "consultations": artifact_files.with_files(
            folder, list(trial.consultations.order_by("created_at", "id"))
        ),
        # The agent's calls to the case's mocks: in the transcript by time, and the Mocks tab.
        "trailing_mock_calls": trailing_mock_calls,
        "mock_groups": by_mock(trial, mock_calls),
    }
    return render(request, "dashboard/trial.html", context)


@login_required
def trial_trajectory(request: HtmxHttpRequest, trial_id: int) -> JsonResponse:
    """The trial's transcript as an ATIF trajectory.json (evals_app.atif_trajectory)."""
    trial = get_or_404(
        trials_for(request.user).select_related("run__variant", "run__case_version__case"),
        pk=trial_id,
    )
    response = JsonResponse(trial_trajectory_of(trial), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = 'attachment; filename="trajectory.json"'
    return response


@login_required
def trial_artifact(request: HtmxHttpRequest, trial_id: int, path: str) -> FileResponse:
    """One file of the trial's artifacts folder, always as plain text: an agent wrote it, so
    the browser must never run or sniff it as anything else."""
    trial = get_or_404(trials_for(request.user), pk=trial_id)
    folder = artifact_files.trial_folder(trial)
    target = artifact_files.resolve_inside(folder, path) if folder else None
    if target is None:
        raise Http404("No such artifact.")
    response = FileResponse(target.open("rb"), content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    return response
