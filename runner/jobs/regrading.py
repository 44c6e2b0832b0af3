"""Running a re-grade trial from the database: what the original trial left (its turns and
events, its mocks' calls, ``conversation.json`` with its kept workspace, its approved plan),
read back and handed to ``runner.trial.regrade``."""

from __future__ import annotations

import json
from pathlib import Path

from evals_app.models import Event, MockCall, Trial, Turn
from proctor.agent_events import AgentEvent
from runner.core.mock_calls import MockCall as LoggedCall
from runner.core.mock_calls import MockLog
from runner.jobs import artifact_paths
from runner.trial.regrade import StoredTrial, StoredTurn

# The original's record of its conversation, copied to the re-graded trial as it was.
_COPIED = (
    "answer",
    "session_id",
    "conversation_outcome",
    "stop_cause",
    "responder_cause",
    "plan_state",
    "plan_signal",
)


def regraded_trial_id(trial: Trial) -> int | None:
    """The id of the trial that ``trial`` (of a re-grade batch) grades again; None for a trial
    of any other batch."""
    originals = (trial.run.spec or {}).get("regrade_of")
    if not originals:
        return None
    return int(originals[trial.index]) if trial.index < len(originals) else None


def stored_trial(trial_id: int) -> StoredTrial:
    """What trial ``trial_id`` left (four queries and two files)."""
    original = Trial.objects.select_related("run").get(pk=trial_id)
    folder = (
        Path(original.artifacts_dir)
        if original.artifacts_dir
        else artifact_paths.trial_dir(original.run.batch_id, original.pk)
    )
    turns = {
        turn.index: StoredTurn(turn.prompt, turn.origin or {}, turn.mode)
        for turn in Turn.objects.filter(trial_id=trial_id).order_by("index")
    }
    for event in Event.objects.filter(trial_id=trial_id).order_by("seq"):
        if event.kind in ("ProtocolError", "Log"):
            continue  # the agent's own record, not what checks read
        turn = turns.setdefault(event.turn_index, StoredTurn(""))
        turn.events.append(
            AgentEvent(kind=event.kind, data=event.data, at_ms=int(event.at.timestamp() * 1000))
        )
    calls: dict[str, list[LoggedCall]] = {}
    kinds: dict[str, str] = {}
    for row in MockCall.objects.filter(trial_id=trial_id).order_by("mock", "seq"):
        calls.setdefault(row.mock, []).append(LoggedCall.from_json(row.record))
        kinds[row.mock] = row.kind
    return StoredTrial(
        trial_id=original.pk,
        batch_id=original.run.batch_id,
        turns=[turns[index] for index in sorted(turns)],
        conversation=_json_file(folder / "conversation.json"),
        mock_calls={name: MockLog(name, kinds[name], found) for name, found in calls.items()},
        duration_ms=original.duration_ms or 0,
        approved_plan=_text_file(folder / "outputs" / "plan.md"),
        fields={name: getattr(original, name) for name in _COPIED},
        status=original.status,
        error=original.error,
    )


def _json_file(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _text_file(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None
