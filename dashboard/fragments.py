"""The page fragments a live update replaces, rendered by the same template partials and cell
renderers as the pages themselves, each marked for an out-of-band swap by its element id.

The websocket consumer calls these when the runner says something changed; every function
reads the database (a handful of queries, independent of the batch's size) and returns HTML.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.template.loader import render_to_string

from dashboard.check_panel import trial_check_reports
from dashboard.grid_cells import render_grid_cell, render_total
from dashboard.transcript_paging import transcript_page
from dashboard.views.runs import trial_row
from evals_app.models import Batch, Run, Trial
from evals_app.pass_rates import (
    GridCell,
    Tally,
    column_tally,
    row_tally,
    run_cell,
    run_cells,
    runs_tally,
    trials_tally,
    validity_warnings,
)


def batch_status(batch: Batch) -> str:
    """The batch's status badge and progress bar (one query)."""
    tally = runs_tally(Run.objects.filter(batch=batch))
    return render_to_string(
        "dashboard/grid.html#batch_status", {"batch": batch, "batch_tally": tally, "oob": True}
    )


def _cell(cell: GridCell) -> str:
    return render_grid_cell(cell, oob=True)


def _total(total_id: str, tally: Tally) -> str:
    return render_total(total_id, tally, oob=True)


def _column_warnings(variant_id: int, warnings: dict[str, int]) -> str:
    return render_to_string(
        "dashboard/grid.html#column_warnings",
        {"variant_id": variant_id, "warnings": warnings, "oob": True},
    )


def grid_cell_update(batch: Batch, run_id: int) -> str:
    """One run's cell with its row and column totals, its column's validity warnings, the
    batch's total and status."""
    cell = run_cell(batch, run_id)
    if cell is None:
        return ""
    batch_tally = runs_tally(Run.objects.filter(batch=batch))
    warnings = validity_warnings(batch, cell.variant_id).get(cell.variant_id, {})
    return "".join(
        [
            _cell(cell),
            _total(f"row-total-{cell.case_version_id}", row_tally(batch.pk, cell.case_version_id)),
            _total(f"col-total-{cell.variant_id}", column_tally(batch.pk, cell.variant_id)),
            _column_warnings(cell.variant_id, warnings),
            _total("grid-total", batch_tally),
            render_to_string(
                "dashboard/grid.html#batch_status",
                {"batch": batch, "batch_tally": batch_tally, "oob": True},
            ),
        ]
    )


def grid_catch_up(batch: Batch, run_ids: Iterable[int]) -> str:
    """Cells of many runs at once (after a page load raced with the runner), with every
    row and column total and column warnings they touch: three queries however many runs
    changed."""
    ids = list(run_ids)
    if not ids:
        return batch_status(batch)
    everything = run_cells(Run.objects.filter(batch=batch))
    changed = set(ids)
    cells = [c for c in everything if c.run_id in changed]
    rows = {c.case_version_id for c in cells}
    columns = {c.variant_id for c in cells}
    row_totals: dict[int, Tally] = {}
    column_totals: dict[int, Tally] = {}
    batch_tally = Tally()
    for cell in everything:
        batch_tally += cell.tally
        if cell.case_version_id in rows:
            row_totals[cell.case_version_id] = (
                row_totals.get(cell.case_version_id, Tally()) + cell.tally
            )
        if cell.variant_id in columns:
            column_totals[cell.variant_id] = (
                column_totals.get(cell.variant_id, Tally()) + cell.tally
            )
    parts = [_cell(cell) for cell in cells]
    parts += [_total(f"row-total-{pk}", tally) for pk, tally in row_totals.items()]
    parts += [_total(f"col-total-{pk}", tally) for pk, tally in column_totals.items()]
    warnings = validity_warnings(batch)
    parts += [_column_warnings(pk, warnings.get(pk, {})) for pk in column_totals]
    parts.append(_total("grid-total", batch_tally))
    parts.append(
        render_to_string(
            "dashboard/grid.html#batch_status",
            {"batch": batch, "batch_tally": batch_tally, "oob": True},
        )
    )
    return "".join(parts)


def run_trial_updates(run: Run, trial_ids: Iterable[int]) -> str:
    """The run page's rows for these trials and the run's status line."""
    trials = Trial.objects.filter(run=run, pk__in=list(trial_ids)).order_by("index")
    parts = [
        render_to_string("dashboard/run.html#trial_row", {"row": trial_row(trial), "oob": True})
        for trial in trials
    ]
    parts.append(
        render_to_string(
            "dashboard/run.html#run_status",
            {"run": run, "tally": trials_tally(run.trials.all()), "oob": True},
        )
    )
    return "".join(parts)


def trial_state_update(trial: Trial) -> str:
    """The trial page's summary, and its checks once the trial has finished."""
    trial.refresh_from_db()
    parts = [render_to_string("dashboard/trial.html#trial_summary", {"trial": trial, "oob": True})]
    if trial.is_final:
        parts.append(
            render_to_string(
                "dashboard/trial.html#trial_checks",
                {
                    "trial": trial,
                    "run": trial.run,
                    "reports": trial_check_reports(trial),
                    "oob": True,
                },
            )
        )
    return "".join(parts)


MAX_TAIL_PAGES = 5


@dataclass(frozen=True)
class TranscriptTail:
    html: str
    last_seq: int
    turns_shown: int


def transcript_tail(trial: Trial, *, after: int, turns_shown: int) -> TranscriptTail:
    """Events stored after ``after`` (and the turns they open), to append to the transcript.

    Reads a page at a time and stops after MAX_TAIL_PAGES; the next update brings the rest.
    """
    parts = []
    for _ in range(MAX_TAIL_PAGES):
        page = transcript_page(trial, after=after, turns_shown=turns_shown)
        if not page.entries:
            break
        parts.append(
            render_to_string("dashboard/trial.html#transcript_tail", {"trial": trial, "page": page})
        )
        after, turns_shown = page.last_seq, page.turns_shown
        if page.next_after is None:
            break
    return TranscriptTail("".join(parts), after, turns_shown)
