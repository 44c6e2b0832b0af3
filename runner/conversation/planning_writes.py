"""Writes made while planning: plan mode that failed to keep the workspace read-only.

A harness's plan mode should refuse every edit (a refusal is the mode working, recorded as a
denial with no warning). Some let writes through: the command harness only tells its agent it
is planning, and OpenCode's plan agent can still reach the shell. Those writes are found by
comparing the workspace at the end of the planning phase with its state at the start, and are
recorded beside the denials in ``permission-denials.json`` with the status
``wrote_while_planning``. Unlike a denial, each such trial is a validity warning of its variant
in ``benchmark.json``: the agent was not planning when the comparison assumed it was.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

WROTE_WHILE_PLANNING = "wrote_while_planning"
DENIALS_ARTIFACT = "permission-denials.json"
_DIFF_HEADER = "diff --git "
_LARGE_FILE = "large file changed: "


def changed_paths(workspace_diff: str) -> list[str]:
    """The workspace paths a ``WorkspaceSnapshot.diff`` text names, in order."""
    paths = []
    for line in workspace_diff.splitlines():
        if line.startswith(_LARGE_FILE):
            paths.append(line[len(_LARGE_FILE) :])
        elif line.startswith(_DIFF_HEADER):
            # "a/<path> b/<path>" (quoted when the path needs it): both halves are the same path.
            rest = line[len(_DIFF_HEADER) :]
            half = rest[: (len(rest) - 1) // 2]
            paths.append(half.strip('"')[2:])
    return paths


def planning_write_records(paths: list[str], *, turn: int) -> list[dict[str, Any]]:
    """One ``permission-denials.json`` entry per file changed while planning."""
    return [
        {
            "tool": None,
            "input": {"path": path},
            "status": WROTE_WHILE_PLANNING,
            "turn": turn,
            "mode": "plan",
            # Not the mode refusing a write: the mode failing to.
            "plan_mode_attributed": False,
            "detected_by": "workspace snapshot at the end of the planning phase",
        }
        for path in paths
    ]


def wrote_while_planning(trial_folder: Path) -> bool:
    """Whether a trial's recorded evidence holds a write made while planning."""
    try:
        entries = json.loads((trial_folder / DENIALS_ARTIFACT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(entries, list) and any(
        isinstance(e, dict) and e.get("status") == WROTE_WHILE_PLANNING for e in entries
    )
