"""Grading weighted assertions, and combining them into a trial's score.

Text assertions read what the agent said across the conversation (``equals`` and ``is-json``
read its final answer); ``llm-rubric`` asks a model judge; ``python`` calls the eval's function;
``latency``, ``cost`` and ``turn-count`` compare a measure of the trial with a bound.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proctor.assertions import CALL_TYPES, Assertion
from proctor.definitions import Verdict
from proctor.judges import Judge
from runner.core.awaiting import resolved
from runner.core.limits import UserCodeError, default_limits, run_forked
from runner.core.mock_calls import call_assertion_verdict
from runner.core.results import CheckResult, ConsultationRecord, clip
from runner.grading.checks import CheckContext, checked_verdict
from runner.grading.judges import judge_config, run_judge
from runner.llm import LLMConfig


@dataclass
class TrialMeasures:
    """What bound assertions compare: agent time, cost (None when unknown), person's turns."""

    agent_ms: int
    cost_usd: float | None
    user_turns: int


def _as_list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]


def _text_verdict(kind: str, value: Any, said: str, answer: str) -> tuple[bool, str]:
    if kind in ("contains", "not-contains", "icontains", "not-icontains"):
        folded = kind.endswith("icontains")  # the i: case folded
        said_it = str(value).lower() in said.lower() if folded else str(value) in said
        message = f"the agent {'said' if said_it else 'never said'} {value!r}"
        return (not said_it if kind.startswith("not-") else said_it), message
    if kind == "contains-any":
        present = [v for v in _as_list(value) if v in said]
        return bool(present), f"found {present}" if present else f"none of {_as_list(value)} found"
    if kind == "contains-all":
        missing = [v for v in _as_list(value) if v not in said]
        return not missing, f"missing {missing}" if missing else "all found"
    if kind in ("regex", "not-regex"):
        match = re.search(str(value), said)
        message = f"matched {match.group(0)!r}" if match else f"no match for /{value}/"
        return (match is None if kind == "not-regex" else match is not None), message
    if kind == "equals":
        same = answer.strip() == str(value).strip()
        return same, "the final answer equals the value" if same else "the final answer differs"
    if kind == "is-json":
        try:
            json.loads(answer)
        except json.JSONDecodeError as exc:
            return False, f"the final answer is not JSON ({exc.msg})"
        return True, "the final answer is JSON"
    raise ValueError(kind)


def _bound_verdict(kind: str, value: Any, measures: TrialMeasures) -> tuple[bool, str]:
    bound = float(value)
    if kind == "latency":
        return measures.agent_ms <= bound, f"agent time {measures.agent_ms} ms (at most {bound:g})"
    if kind == "turn-count":
        return measures.user_turns <= bound, f"{measures.user_turns} turns (at most {bound:g})"
    if measures.cost_usd is None:
        return False, "no cost known: the harness reported none and the variant sets no prices"
    return measures.cost_usd <= bound, f"cost ${measures.cost_usd:.4f} (at most ${bound:g})"


def _python_verdict(
    func: Any, ctx: CheckContext, *, name: str, limit_s: float
) -> tuple[tuple[bool, float, str], str]:
    """((passed, score, message), printed) of the eval's assertion function, run in a forked
    child for at most ``limit_s`` like a validator (runner.core.limits): a hang cannot hold the
    worker. Raises UserCodeError when it hangs, raises or ends its process."""
    return run_forked(
        lambda _note: _python_value(func, ctx), limit_s=limit_s, what=f"assertion {name}"
    )


def _python_value(func: Any, ctx: CheckContext) -> tuple[bool, float, str]:
    value = resolved(func(ctx))
    if isinstance(value, Verdict):
        checked_verdict(value)
        score = value.score if value.score is not None else float(value.passed)
        return value.passed, score, value.message
    if isinstance(value, bool):
        return value, float(value), ""
    if isinstance(value, int | float):
        if value != value:  # NaN: clamping it made a passing score of 1
            raise ValueError("returned nan; a score is a number from 0 to 1")
        score = max(0.0, min(1.0, float(value)))
        return score >= 0.5, score, f"score {score:g}"
    raise TypeError(
        f"returned {type(value).__name__}; an assertion function returns a bool, a score or a Verdict"
    )


def run_assertion(
    item: Assertion,
    ctx: CheckContext,
    *,
    index: int,
    measures: TrialMeasures,
    judge_model: str | None = None,
    plan: str | None = None,
    project_llm: LLMConfig | None = None,
    limit_s: float | None = None,
) -> tuple[CheckResult, ConsultationRecord | None]:
    """Grade one assertion; an assertion that breaks is a failed check saying why.

    ``project_llm`` is the project's model endpoint for ``llm-rubric`` (see ``judge_config``);
    ``limit_s`` bounds a ``python`` assertion (default: the worker's check limit)."""
    started = time.monotonic()
    record = None
    output = ""
    try:
        if item.type == "llm-rubric":
            rubric = Judge(rubric=str(item.value), name=item.label)
            result, record = run_judge(
                rubric,
                ctx,
                config=judge_config(rubric, cli_model=judge_model, project_llm=project_llm),
                index=index,
                plan=plan,
            )
            passed, score, message = (
                result.passed,
                result.score if result.score is not None else float(result.passed),
                result.message,
            )
        elif item.type == "python":
            limit = limit_s if limit_s is not None else default_limits().check_s
            (passed, score, message), output = _python_verdict(
                item.value, ctx, name=item.label, limit_s=limit
            )
        elif item.type in ("latency", "cost", "turn-count"):
            passed, message = _bound_verdict(item.type, item.value, measures)
            score = float(passed)
        elif item.type in CALL_TYPES:
            passed, message = call_assertion_verdict(item.type, item.value, ctx.mocks)
            score = float(passed)
        else:
            passed, message = _text_verdict(item.type, item.value, ctx.transcript(), ctx.answer())
            score = float(passed)
    except UserCodeError as exc:  # hung, raised or ended its process: that assertion fails
        passed, score, message, output = False, 0.0, str(exc), exc.printed
    except Exception as exc:  # an assertion's own bug fails that assertion, not the trial
        passed, score, message = False, 0.0, f"{type(exc).__name__}: {exc}"
    check = CheckResult(
        name=item.label,
        kind="assertion",
        passed=passed,
        message=message,
        score=score,
        output=clip(output),
        duration_ms=int((time.monotonic() - started) * 1000),
    )
    check.weight = item.weight
    check.metric = item.metric or item.type
    return check, record


def weighted_score(results: Sequence[CheckResult]) -> float | None:
    """Σ weight × score / Σ weight over assertions weighing more than zero; None without any."""
    weighed = [
        (r.weight or 0.0, r.score or 0.0)
        for r in results
        if r.kind == "assertion" and (r.weight or 0) > 0
    ]
    total = sum(w for w, _ in weighed)
    return sum(w * s for w, s in weighed) / total if total else None


def trial_passes(results: Sequence[CheckResult], threshold: float | None) -> bool:
    """Every other check must pass; assertions pass as a whole by threshold, or each one
    (weight above zero) when the case sets none. Weight-0 assertions never decide, even when
    nothing else does."""
    others = [r for r in results if r.kind != "assertion"]
    weighed = [r for r in results if r.kind == "assertion" and (r.weight or 0) > 0]
    if not results:
        return False
    if not all(r.passed for r in others):
        return False
    if not weighed:
        return True
    if threshold is not None:
        score = weighted_score(results)
        return score is not None and score >= threshold
    return all(r.passed for r in weighed)
