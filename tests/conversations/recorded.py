"""Running `proctor eval` on conversation cases played by the talker agent, and reading back
what a trial recorded: its row, conversation.json, its artifacts and its consultations."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from e2e.running import Backend, trial_folder

AGENTS = Path(__file__).resolve().parent / "agents"
BOTH_CAPABILITIES = ("conversation-resume", "plan-mode")
TRIAL_COLUMNS = (
    "id",
    "status",
    "conversation_outcome",
    "stop_cause",
    "responder_cause",
    "plan_state",
    "plan_signal",
    "session_id",
    "duration_ms",
    "error",
)
CONSULTATION_COLUMNS = (
    "kind",
    "turn_index",
    "check_index",
    "model",
    "prompt",
    "answer",
    "verdict",
    "reason",
    "cause",
    "duration_ms",
)


def talker_profile(
    *,
    name: str = "talker",
    capabilities: tuple[str, ...] = BOTH_CAPABILITIES,
    plan_file: str | None = None,
) -> str:
    """Python source of the talker's command-harness profile."""
    extra = f", plan_file={plan_file!r}" if plan_file else ""
    return (
        f"profile({name!r}, dir={str(AGENTS)!r}, run='python3 \"$PROCTOR_PROFILE_DIR/talker.py\"', "
        f"capabilities={list(capabilities)!r}{extra})"
    )


@dataclass
class EvalRun:
    result: subprocess.CompletedProcess
    batch: int


def run_eval(backend: Backend, folder: Path, *args: str) -> EvalRun:
    """`proctor eval` on ``folder``; fails the test unless it ran a batch and exited 0."""
    result = backend.eval(folder, *args)
    assert result.returncode == 0, (
        f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    )
    found = re.search(r"Batch (\d+):", result.stderr)
    assert found, f"no batch announced on stderr: {result.stderr}"
    return EvalRun(result, int(found.group(1)))


def benchmark(backend: Backend, batch: int) -> dict[str, Any]:
    return json.loads((backend.artifacts / "batches" / str(batch) / "benchmark.json").read_text())


@dataclass
class RecordedTrial:
    backend: Backend
    batch: int
    row: dict[str, Any]

    @property
    def folder(self) -> Path:
        return trial_folder(self.backend, self.batch, self.row["id"])

    def artifact(self, relative: str) -> str:
        return (self.folder / relative).read_text(encoding="utf-8")

    def has_artifact(self, relative: str) -> bool:
        return (self.folder / relative).is_file()

    @cached_property
    def conversation(self) -> dict[str, Any]:
        return json.loads(self.artifact("conversation.json"))

    @property
    def turns(self) -> list[dict[str, Any]]:
        return self.conversation["turns"]

    @property
    def user_messages(self) -> list[str]:
        """What the agent was sent, in order, the opening prompt first."""
        return [turn["prompt"] for turn in self.turns]

    def consultations(self, kind: str) -> list[dict[str, Any]]:
        rows = self.backend.rows(
            f"SELECT {', '.join(CONSULTATION_COLUMNS)} FROM evals_app_consultation WHERE trial_id = ? AND kind = ? "
            "ORDER BY id",
            self.row["id"],
            kind,
        )
        found = []
        for row in rows:
            record = dict(zip(CONSULTATION_COLUMNS, row, strict=True))
            record["prompt"] = self.backend.json_value(record["prompt"])
            found.append(record)
        return found

    def turn_rows(self) -> list[tuple[int, str, dict[str, Any], str]]:
        """(index, prompt, origin, mode) of the trial's Turn rows: what the dashboard shows."""
        rows = self.backend.rows(
            'SELECT "index", prompt, origin, mode FROM evals_app_turn WHERE trial_id = ? '
            'ORDER BY "index"',
            self.row["id"],
        )
        return [
            (index, prompt, self.backend.json_value(origin), mode)
            for index, prompt, origin, mode in rows
        ]

    def checks(self) -> list[dict[str, Any]]:
        columns = ("index", "name", "kind", "passed", "message")
        rows = self.backend.rows(
            'SELECT "index", name, kind, passed, message FROM evals_app_check '
            'WHERE trial_id = ? ORDER BY "index"',
            self.row["id"],
        )
        return [dict(zip(columns, row, strict=True)) for row in rows]

    def started_session_ids(self) -> list[tuple[int, str]]:
        """(turn, session id) of every Started event, in order."""
        return [
            (turn, data["session_id"]) for turn, kind, data in self._events() if kind == "Started"
        ]

    def _events(self) -> list[tuple[int, str, dict[str, Any]]]:
        rows = self.backend.rows(
            "SELECT turn_index, kind, data FROM evals_app_event WHERE trial_id = ? ORDER BY seq",
            self.row["id"],
        )
        return [(turn, kind, self.backend.json_value(data)) for turn, kind, data in rows]


def recorded_trial(backend: Backend, batch: int, case: str) -> RecordedTrial:
    """The one trial of ``case`` in ``batch``."""
    ids = backend.trial_ids(batch, case)
    assert len(ids) == 1, f"expected one trial of {case} in batch {batch}, found {ids}"
    values = backend.rows(
        f"SELECT {', '.join(TRIAL_COLUMNS)} FROM evals_app_trial WHERE id = ?", ids[0]
    )[0]
    return RecordedTrial(backend, batch, dict(zip(TRIAL_COLUMNS, values, strict=True)))


def responder_texts(body: dict[str, Any]) -> tuple[str, str]:
    """(system, user) text of a consultation request the fake server received."""
    system = "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")
    user = "\n".join(m["content"] for m in body["messages"] if m["role"] != "system")
    return system, user
