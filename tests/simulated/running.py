"""Eval sources played by the caller agent, and what a trial's weighted assertions stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conversations.recorded import RecordedTrial

AGENTS = Path(__file__).resolve().parent / "agents"
CHECK_COLUMNS = ("index", "name", "kind", "passed", "score", "weight", "metric", "message")


def caller_profile(*, capabilities: tuple[str, ...] = ("conversation-resume",)) -> str:
    """Python source of the caller agent's command-harness profile."""
    return (
        f"profile('caller', dir={str(AGENTS)!r}, run='python3 \"$PROCTOR_PROFILE_DIR/caller.py\"', "
        f"capabilities={list(capabilities)!r})"
    )


def check_rows(trial: RecordedTrial) -> list[dict[str, Any]]:
    """The trial's Check rows as the dashboard reads them, in order."""
    rows = trial.backend.rows(
        'SELECT "index", name, kind, passed, score, weight, metric, message FROM evals_app_check '
        'WHERE trial_id = ? ORDER BY "index"',
        trial.row["id"],
    )
    return [
        dict(zip(CHECK_COLUMNS, (*row[:3], bool(row[3]), *row[4:]), strict=True)) for row in rows
    ]


def score_and_threshold(trial: RecordedTrial) -> tuple[float | None, float | None]:
    return trial.backend.rows(
        "SELECT score, threshold FROM evals_app_trial WHERE id = ?", trial.row["id"]
    )[0]
