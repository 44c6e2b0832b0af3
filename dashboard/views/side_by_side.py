"""Two trials of one case side by side (dashboard.side_by_side): the picker of the trial to
compare with, and the page, which draws a window of the aligned conversation at a time and
serves the next windows and turns to htmx from the same template."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render

from dashboard import artifact_files, changed_files
from dashboard.highlighting import highlight_code
from dashboard.side_by_side import (
    TURNS_PER_PAGE,
    PairedRow,
    alignment_of,
    check_pairs,
    comparable_trials,
    describe,
    turn_sections,
    turn_window,
)
from dashboard.views import HtmxHttpRequest, int_param
from dashboard.views.trials import DIFF_PATH, trial_for_page
from evals_app.models import Trial


@login_required
def compare_picker(request: HtmxHttpRequest, trial_id: int) -> HttpResponse:
    """The trials of the same case this one can be compared with."""
    trial = trial_for_page(request.user, trial_id)
    context = {
        "trial": trial,
        "run": trial.run,
        "candidates": comparable_trials(request.user, trial),
    }
    return render(request, "dashboard/trial_picker.html", context)


def _workspace_diff(trial: Trial) -> str | None:
    folder = artifact_files.trial_folder(trial)
    return artifact_files.read_small_text(folder, DIFF_PATH) if folder else None


@login_required
def side_by_side(request: HtmxHttpRequest, trial_id: int, other_id: int) -> HttpResponse:
    """Trial A (``trial_id``) and trial B (``other_id``) side by side. ``?turn=&start=`` opens
    a turn at a row (``&stop=&fold=0``: rows folded as the same in both, drawn), and HTMX gets
    that window alone; ``?turns_from=`` is a later page of turns."""
    a = trial_for_page(request.user, trial_id)
    b = trial_for_page(request.user, other_id)
    if a.run.case_version.case_id != b.run.case_version.case_id:
        raise Http404("Only two trials of one case can be compared.")
    alignment = alignment_of(a, b)
    base = {"a": a, "b": b, "alignment": alignment}

    asked_turn = int_param(request, "turn")
    opened = alignment.turn(asked_turn) if asked_turn is not None else None
    if opened is None and alignment.divergence is not None:
        opened = alignment.turn(alignment.divergence.turn)
    if opened is None and alignment.turns:
        opened = alignment.turns[0]
    window = None
    if opened is not None:
        window = turn_window(
            a,
            b,
            opened,
            start=max(0, int_param(request, "start", 0)),
            stop=int_param(request, "stop"),
            folding=request.GET.get("fold") != "0",
        )
    if request.htmx and asked_turn is not None:
        if window is None:
            raise Http404
        return render(
            request, "dashboard/side_by_side.html#turn_window", {**base, "window": window}
        )

    positions = {turn.index: n for n, turn in enumerate(alignment.turns)}
    default_from = 0
    if opened is not None and positions[opened.index] >= TURNS_PER_PAGE:
        default_from = positions[opened.index]
    turns_from = max(0, int_param(request, "turns_from", default_from))
    shown = list(alignment.turns[turns_from : turns_from + TURNS_PER_PAGE])
    context = {
        **base,
        "sections": turn_sections(a, b, shown),
        "window": window,
        "turns_from": turns_from,
        "next_turns_from": turns_from + TURNS_PER_PAGE
        if turns_from + TURNS_PER_PAGE < len(alignment.turns)
        else None,
    }
    if request.htmx and "turns_from" in request.GET:
        return render(request, "dashboard/side_by_side.html#turn_sections", context)

    divergence = alignment.divergence
    at_divergence = None
    if window is not None and divergence is not None and window.turn.index == divergence.turn:
        at_divergence = next(
            (
                item
                for item in window.items
                if isinstance(item, PairedRow) and item.row.position == divergence.row
            ),
            None,
        )
    # The summary's link jumps within the page when the mark is drawn, else opens the page
    # at the divergence's turn.
    context["divergence_on_page"] = divergence is not None and (
        at_divergence is not None
        if divergence.row is not None
        else any(turn.index == divergence.turn for turn in shown)
    )
    if at_divergence is not None:
        context["divergence_row"] = at_divergence
        context["divergence_a"] = describe(at_divergence.a)
        context["divergence_b"] = describe(at_divergence.b)

    diff_a, diff_b = _workspace_diff(a), _workspace_diff(b)
    files = changed_files.compare(diff_a or "", diff_b or "")
    context.update(
        checks=check_pairs(a, b),
        diffs_missing=[name for name, diff in (("A", diff_a), ("B", diff_b)) if diff is None],
        files=[(file, highlight_code(file.diff, "diff") if file.diff else None) for file in files],
        files_differing=sum(1 for file in files if file.state != "same"),
    )
    return render(request, "dashboard/side_by_side.html", context)
