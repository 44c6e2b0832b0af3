"""An adaptive batch's next trials: after a cell's (case x variant) trials end, one more goes
to each cell whose outcome is still undecided (evals_app.sequential_trials), up to its maximum;
the batch closes only once no cell is undecided and nothing runs.

Both happen in one place, ``continue_or_close``, in one transaction holding the batch's row
lock: two trials ending together never both add (their runs' counts are read under the lock,
and the (run, index) constraint refuses a duplicate anyway), and no trial ending between the
look and the close can leave an undecided cell behind a finished batch. Every trial end of an
adaptive batch asks, so a process that died between its trial's end and its look leaves
nothing undone: the next end (or the reaper's) looks at every idle cell of the batch.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from evals_app import hot_sql
from evals_app.models import Batch, Run, Trial
from evals_app.sequential_trials import (
    Cell,
    cell_decision,
    cells_wanting_a_trial,
    confidence_sequence,
    pair_decided,
    trials_saved,
)
from proctor.definitions import AdaptiveTrials

_COUNTS = ("trials_total", "trials_passed", "trials_queued", "trials_running")


def rule_of(recorded: dict[str, Any] | None) -> AdaptiveTrials | None:
    """The rule a run recorded (Run.adaptive), or None for a fixed count."""
    if not recorded:
        return None
    return AdaptiveTrials(
        min=int(recorded["min"]),
        max=int(recorded["max"]),
        threshold=float(recorded["threshold"]),
        confidence=float(recorded["confidence"]),
    )


def continue_or_close(batch_id: int) -> tuple[bool, list[int]]:
    """Under the batch's row lock: queue one more trial in each idle, undecided cell below its
    maximum, or, when there is none and no trial is left to run, close the batch. Returns
    whether this call closed it and the ids of the trials it queued (start them after)."""
    with transaction.atomic():
        batch = Batch.objects.select_for_update().get(pk=batch_id)
        if batch.status == Batch.Status.FINISHED:
            return False, []
        # A batch stopped at its budget starts nothing more, however undecided its cells.
        added = _queue_next_trials(batch) if batch.budget_reached_usd is None else []
        closed = not added and batch.close_locked()
    return closed, added


def _queue_next_trials(batch: Batch) -> list[int]:
    runs = Run.objects.filter(batch=batch, adaptive__isnull=False).values(
        "id", "case_version_id", "variant_id", "adaptive", *_COUNTS
    )
    by_case: dict[int, dict[int, dict[str, Any]]] = defaultdict(dict)
    for run in runs:
        by_case[run["case_version_id"]][run["variant_id"]] = run
    wanted: list[dict[str, Any]] = []
    for cells in by_case.values():
        rule = rule_of(next(iter(cells.values()))["adaptive"])
        assert rule is not None
        seen = {variant: _cell(run) for variant, run in cells.items()}
        wanted += [cells[variant] for variant in cells_wanting_a_trial(seen, rule)]
    return hot_sql.insert_copies(
        Trial,
        Trial(),
        # The next index: a run's trials are numbered 0..total-1, none removed.
        [{"run_id": run["id"], "index": run["trials_total"]} for run in wanted],
    )


def _cell(run: dict[str, Any]) -> Cell:
    return Cell(
        passes=run["trials_passed"],
        trials=run["trials_total"] - run["trials_queued"] - run["trials_running"],
        running=run["trials_queued"] + run["trials_running"],
    )


# --- what the batch page, `proctor eval` and --json say ---------------------------------------


@dataclass(frozen=True)
class CellOutcome:
    """One adaptive cell: its trials, whether its outcome is decided, and its interval."""

    run_id: int
    trials: int
    decision: str | None  # "above", "below" or None (undecided)
    interval: tuple[float, float]
    rule: AdaptiveTrials

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.rule.to_json(),
            "trials": self.trials,
            "decision": self.decision or "undecided",
            "interval": [round(self.interval[0], 4), round(self.interval[1], 4)],
        }


@dataclass(frozen=True)
class Savings:
    """What adaptive trials spared a batch: trials run, the most they could have been, saved."""

    cells: int
    trials: int
    maximum: int
    undecided: int  # cells that reached their maximum undecided

    @property
    def saved(self) -> int:
        return self.maximum - self.trials

    @property
    def sentence(self) -> str:
        return adaptive_sentence(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return {
            "cells": self.cells,
            "trials": self.trials,
            "maximum": self.maximum,
            "saved": self.saved,
            "undecided_at_maximum": self.undecided,
        }


def adaptive_sentence(saving: dict[str, Any]) -> str:
    """The saving in one line, from ``Savings.to_dict()`` (a server's report holds only that):
    "Adaptive trials: 26 run, 10 saved against 36 at the maximum in all 3 cells"."""
    undecided = saving["undecided_at_maximum"]
    cells = saving["cells"]
    return (
        f"Adaptive trials: {saving['trials']} run, {saving['saved']} saved against "
        f"{saving['maximum']} at the maximum in all {cells} cell{'s' if cells != 1 else ''}"
        + (
            f"; {undecided} cell{'s' if undecided != 1 else ''} undecided at the maximum"
            if undecided
            else ""
        )
        + "."
    )


def cell_outcomes(batch: Batch) -> dict[int, CellOutcome]:
    """Each adaptive run of the batch (by id) as the procedure sees it now (one query)."""
    runs = Run.objects.filter(batch=batch, adaptive__isnull=False).values(
        "id", "case_version_id", "variant_id", "adaptive", *_COUNTS
    )
    by_case: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        by_case[run["case_version_id"]].append(run)
    outcomes: dict[int, CellOutcome] = {}
    for cells in by_case.values():
        for run in cells:
            rule = rule_of(run["adaptive"])
            assert rule is not None
            cell = _cell(run)
            decision = cell_decision(cell.passes, cell.trials, rule)
            others = [_cell(other) for other in cells if other is not run]
            settled = all(
                pair_decided((cell.passes, cell.trials), (o.passes, o.trials), rule) for o in others
            )
            outcomes[run["id"]] = CellOutcome(
                run_id=run["id"],
                trials=run["trials_total"],
                decision=decision if settled else None,
                interval=confidence_sequence(cell.passes, cell.trials, 1 - rule.confidence),
                rule=rule,
            )
    return outcomes


def savings(batch: Batch) -> Savings | None:
    """The batch's saving against running every adaptive cell to its maximum; None when no run
    of it is adaptive."""
    if not batch.is_adaptive:
        return None
    outcomes = list(cell_outcomes(batch).values())
    if not outcomes:
        return None
    maximum = sum(o.rule.max for o in outcomes)
    saved = sum(trials_saved([o.trials], o.rule) for o in outcomes)
    return Savings(
        cells=len(outcomes),
        trials=maximum - saved,
        maximum=maximum,
        undecided=sum(1 for o in outcomes if o.decision is None and o.trials >= o.rule.max),
    )
