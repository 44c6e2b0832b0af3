"""A trial's transcript as an ATIF ``trajectory.json`` (Agent Trajectory Interchange Format),
so other tools can read Proctor's runs.

Each turn's message is a ``user`` step (``system`` when the runner wrote it: a task's step);
each of the agent's messages an ``agent`` step; each command or tool call an ``agent`` step
with its call and, as the observation, what it returned. Usage events become the metrics of the
agent step before them, and the totals ``final_metrics``. Events that say nothing of the
conversation (start, finish, file changes, logs) are left out. Any trial can be exported, task
case or not.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from evals_app.models import Event, Trial, Turn

SCHEMA_VERSION = "ATIF-v1.4"


@dataclass(frozen=True)
class TurnRecord:
    index: int
    prompt: str
    origin: Mapping[str, Any]
    started_at: datetime | None


@dataclass(frozen=True)
class EventRecord:
    turn_index: int
    seq: int
    kind: str
    at: datetime | None
    data: Mapping[str, Any]


def trial_trajectory(trial: Trial) -> dict[str, Any]:
    """The trial's ATIF trajectory (two queries: its turns, its events)."""
    turns = [
        TurnRecord(t.index, t.prompt, t.origin or {}, t.started_at)
        for t in Turn.objects.filter(trial=trial).order_by("index")
    ]
    events = [
        EventRecord(e.turn_index, e.seq, e.kind, e.at, e.data or {})
        for e in Event.objects.filter(trial=trial).order_by("seq")
    ]
    run = trial.run
    variant = run.variant
    spec = variant.spec or {}
    return trajectory(
        turns,
        events,
        # Unique per trajectory; the agent's own session id (shared by, say, every oracle
        # trial) goes with Proctor's ids.
        session_id=f"proctor-trial-{trial.pk}",
        agent_name=variant.harness,
        agent_version=((spec.get("profile") or {}).get("name")) or variant.name,
        model=variant.model or None,
        extra={
            "proctor": {
                "trial": trial.pk,
                "batch": run.batch_id,
                "case": run.case_version.case.slug,
                "variant": variant.name,
                "status": trial.status,
                "agent_session_id": trial.session_id or None,
            }
        },
    )


def trajectory(
    turns: Sequence[TurnRecord],
    events: Iterable[EventRecord],
    *,
    session_id: str,
    agent_name: str,
    agent_version: str,
    model: str | None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ATIF trajectory of one conversation: ``turns`` in order, ``events`` in order."""
    steps: list[dict[str, Any]] = []
    totals = {"prompt": 0, "completion": 0, "cached": 0, "cost": 0.0}
    by_turn: dict[int, list[EventRecord]] = {}
    for event in events:
        by_turn.setdefault(event.turn_index, []).append(event)

    def add(step: dict[str, Any]) -> dict[str, Any]:
        step = {"step_id": len(steps) + 1, **{k: v for k, v in step.items() if v is not None}}
        steps.append(step)
        return step

    for turn in turns:
        add(
            {
                "timestamp": _time(turn.started_at),
                "source": "system" if "runner" in turn.origin else "user",
                "message": turn.prompt,
            }
        )
        last_agent: dict[str, Any] | None = None
        for event in by_turn.get(turn.index, []):
            data = event.data
            if event.kind == "Message":
                source = "agent" if data.get("role", "assistant") == "assistant" else "user"
                step = add(
                    {
                        "timestamp": _time(event.at),
                        "source": source,
                        "message": data.get("text") or "",
                        "model_name": model if source == "agent" else None,
                    }
                )
                if source == "agent":
                    last_agent = step
                    if data.get("usage"):
                        _metrics(step, data["usage"], totals)
            elif event.kind == "Command" and data.get("origin") != "trace":
                call = f"call-{event.seq}"
                exit_code = data.get("exit_code")
                last_agent = add(
                    {
                        "timestamp": _time(event.at),
                        "source": "agent",
                        "message": "",
                        "tool_calls": [
                            {
                                "tool_call_id": call,
                                "function_name": "shell",
                                "arguments": {"command": data.get("command", "")},
                            }
                        ],
                        "observation": {
                            "results": [
                                {
                                    "source_call_id": call,
                                    "content": f"{data.get('output') or ''}"
                                    + ("" if exit_code is None else f"\n[exit {exit_code}]"),
                                }
                            ]
                        },
                    }
                )
            elif event.kind == "ToolCall":
                call = data.get("call_id") or f"call-{event.seq}"
                result = data.get("output") if data.get("output") is not None else data.get("error")
                last_agent = add(
                    {
                        "timestamp": _time(event.at),
                        "source": "agent",
                        "message": "",
                        "tool_calls": [
                            {
                                "tool_call_id": call,
                                "function_name": data.get("name") or "tool",
                                "arguments": _arguments(data.get("input")),
                            }
                        ],
                        "observation": {
                            "results": [{"source_call_id": call, "content": result or ""}]
                        },
                    }
                )
            elif event.kind == "Usage" and last_agent is not None:
                _metrics(last_agent, data, totals)
    final: dict[str, Any] = {
        "total_prompt_tokens": totals["prompt"],
        "total_completion_tokens": totals["completion"],
        "total_cached_tokens": totals["cached"],
        "total_steps": len(steps),
    }
    if totals["cost"]:
        final["total_cost_usd"] = totals["cost"]
    agent: dict[str, Any] = {"name": agent_name, "version": agent_version}
    if model:
        agent["model_name"] = model
    value: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "session_id": session_id,
        "agent": agent,
        "steps": steps,
        "final_metrics": final,
    }
    if extra:
        value["extra"] = dict(extra)
    return value


def _time(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _arguments(text: Any) -> dict[str, Any]:
    """A tool call's input as the object ATIF wants: the JSON object it was, else the text."""
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"input": text}


def _metrics(step: dict[str, Any], usage: Mapping[str, Any], totals: dict[str, Any]) -> None:
    """Add ``usage`` to the step's metrics and to the totals."""
    metrics = step.setdefault("metrics", {})
    prompt = int(usage.get("input_tokens") or 0)
    completion = int(usage.get("output_tokens") or 0)
    cached = int(usage.get("cache_read_tokens") or 0)
    metrics["prompt_tokens"] = metrics.get("prompt_tokens", 0) + prompt
    metrics["completion_tokens"] = metrics.get("completion_tokens", 0) + completion
    if cached:
        metrics["cached_tokens"] = metrics.get("cached_tokens", 0) + cached
    totals["prompt"] += prompt
    totals["completion"] += completion
    totals["cached"] += cached
    cost = usage.get("cost_usd")
    if isinstance(cost, int | float) and cost:
        metrics["cost_usd"] = metrics.get("cost_usd", 0.0) + float(cost)
        totals["cost"] += float(cost)
