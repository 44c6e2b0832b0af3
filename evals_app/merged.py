"""A batch and its reruns read as one result.

"Rerun failed" makes a new batch holding only the rerun trials; read alone, neither batch is
the picture a user wants. The merged view takes a batch with every rerun below it (reruns of
reruns too) and, per cell (suite, case, variant name), either keeps all their trials
(``mode="all"``) or the latest ones (``mode="latest"``): walking the batches oldest first, a
rerun's k trials of a cell take the place of k earlier trials of that cell, the unsuccessful
ones first. So "Rerun failed" replaces exactly the failures, and a full rerun replaces all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields

from evals_app.models import Batch, Trial

# (suite slug, case slug, variant name): one cell of a grid, matched across batches by name.
CellKey = tuple[str, str, str]


@dataclass(frozen=True)
class TrialRow:
    """What compare, flakiness and the CLI read of one trial (no model instance, one query)."""

    id: int
    index: int
    status: str
    session_id: str
    cost_usd: float | None
    input_tokens: int
    output_tokens: int
    run_id: int
    batch_id: int
    case_id: int
    case_slug: str
    case_name: str
    case_version_id: int
    case_version: int
    definition_hash: str
    suite: str
    variant_id: int
    variant: str
    harness: str
    model: str
    sandbox: str
    profile_digest: str
    # The weighted score of the trial's assertions; None for a pass/fail case.
    score: float | None

    @property
    def key(self) -> CellKey:
        return (self.suite, self.case_slug, self.variant)

    @property
    def passed(self) -> bool:
        return self.status == Trial.Status.PASSED

    @property
    def is_final(self) -> bool:
        return self.status in Trial.FINAL_STATUSES


_FIELDS = {
    "id": "id",
    "index": "index",
    "status": "status",
    "session_id": "session_id",
    "cost_usd": "cost_usd",
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "run_id": "run_id",
    "batch_id": "run__batch_id",
    "case_id": "run__case_version__case_id",
    "case_slug": "run__case_version__case__slug",
    "case_name": "run__case_version__case__name",
    "case_version_id": "run__case_version_id",
    "case_version": "run__case_version__number",
    "definition_hash": "run__case_version__definition_hash",
    "suite": "run__case_version__case__suite__slug",
    "variant_id": "run__variant_id",
    "variant": "run__variant__name",
    "harness": "run__variant__harness",
    "model": "run__variant__model",
    "sandbox": "run__variant__sandbox",
    "profile_digest": "run__variant__profile_digest",
    "score": "score",
}


assert list(_FIELDS) == [field.name for field in fields(TrialRow)], "_FIELDS follows TrialRow"


def family_ids(batch: Batch) -> list[int]:
    """``batch`` and every rerun below it, oldest first (one query per generation)."""
    ids = [batch.pk]
    frontier = [batch.pk]
    while frontier:
        frontier = list(
            Batch.objects.filter(parent_id__in=frontier)
            .exclude(pk__in=ids)
            .order_by("created_at", "id")
            .values_list("id", flat=True)
        )
        ids += frontier
    return ids


def trial_rows(trials) -> list[TrialRow]:
    """``TrialRow`` of every trial of the queryset ``trials`` (one query), batch order then
    trial index."""
    rows = trials.order_by(
        "run__batch__created_at", "run__batch_id", "run_id", "index"
    ).values_list(*_FIELDS.values())
    # By position (_FIELDS is in TrialRow's order): a dict per row, then keywords, took twice
    # as long over a 20,000-trial batch.
    return [TrialRow(*row) for row in rows]


def batch_cells(
    batch: Batch, *, merged: bool = True, mode: str = "latest"
) -> dict[CellKey, list[TrialRow]]:
    """The trials of each cell of ``batch``: alone (``merged=False``), or read with its reruns
    by ``mode`` ("latest" or "all", see the module docstring). Cells keep suite, case, variant
    order. Costs one query, plus one per rerun generation when merged."""
    if mode not in ("latest", "all"):
        raise ValueError(f"merge mode must be 'latest' or 'all', not {mode!r}")
    ids = family_ids(batch) if merged else [batch.pk]
    rows = trial_rows(Trial.objects.filter(run__batch_id__in=ids))
    cells: dict[CellKey, list[TrialRow]] = {}
    by_batch: dict[CellKey, dict[int, list[TrialRow]]] = {}
    for row in rows:
        by_batch.setdefault(row.key, {}).setdefault(row.batch_id, []).append(row)
    order = {batch_id: i for i, batch_id in enumerate(ids)}
    for key in sorted(by_batch):
        groups = [by_batch[key][b] for b in sorted(by_batch[key], key=order.__getitem__)]
        cells[key] = _latest(groups) if mode == "latest" else [r for g in groups for r in g]
    return cells


def _latest(groups: Iterable[list[TrialRow]]) -> list[TrialRow]:
    kept: list[TrialRow] = []
    for group in groups:
        if not kept or len(group) >= len(kept):
            kept = list(group)
            continue
        # Replace the unsuccessful trials first, oldest first, then passed ones.
        victims = sorted(range(len(kept)), key=lambda i: (kept[i].passed, i))[: len(group)]
        for slot, row in zip(sorted(victims), group, strict=True):
            kept[slot] = row
    return kept
