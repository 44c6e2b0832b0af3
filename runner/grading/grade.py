"""Grading a finished trial: every check of the case, in order, then the verdict.

Every check runs even after one fails, so each keeps its own result and pass rate. Judges and
``llm-rubric`` assertions consult a model outside the sandbox; what they were shown is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evals_app.resolution import ResolvedCase, trial_prompts
from proctor.assertions import Assertion
from proctor.definitions import Command, Variant
from proctor.judges import Judge
from proctor.tools import Tool
from runner.core.reporting import RedactingRecorder
from runner.core.results import CheckResult
from runner.grading.assertions import (
    TrialMeasures,
    run_assertion,
    scoring_function_verdict,
    trial_passes,
    weighted_score,
)
from runner.grading.checks import CheckContext, run_command_check, run_validator
from runner.grading.judges import judge_config, run_judge


def assertion_context(resolved: ResolvedCase, variant: Variant) -> dict[str, Any]:
    """CheckContext's keyword arguments for promptfoo's assertions: the case's variables, the
    trial's opening prompt, the tools the variant declares."""
    # All of them when a check runs code: recorded so (a case rebuilt from its record has them).
    variables = dict(resolved.case.variables)
    tools = variant.options.get("tools") or ()
    user = (resolved.definition.get("conversation") or {}).get("user") or {}
    return {
        "whole_conversation": user.get("type") == "simulated_user"
        and bool(user.get("persona_opens")),
        # Turns asking the case's prompt again replay earlier questions: the last is its own.
        "last_answer_only": user.get("type") == "turns"
        and any(t.get("variables") is not None for t in user.get("turns") or ()),
        "variables": variables,
        "prompt": trial_prompts(resolved.definition, variant.options)[0],
        "tools": [t.to_openai() for t in tools if isinstance(t, Tool)],
    }


@dataclass
class Grade:
    results: list[CheckResult]
    passed: bool
    score: float | None  # the weighted score of the assertions, when there are any
    threshold: float | None


def grade(
    resolved: ResolvedCase,
    ctx: CheckContext,
    recorder: RedactingRecorder,
    *,
    measures: TrialMeasures,
    judge_model: str | None,
    approved_plan: str | None,
) -> Grade:
    results: list[CheckResult] = []
    check_timeout_ms = resolved.definition["limits"].get("check_timeout_ms")
    for index, check in enumerate(resolved.checks):
        target = check.check
        consultation = None
        if isinstance(target, Command):
            result = run_command_check(target, ctx)
        elif isinstance(target, Judge):
            config = judge_config(target, cli_model=judge_model)
            result, consultation = run_judge(
                target, ctx, config=config, index=index, plan=approved_plan
            )
        elif isinstance(target, Assertion):
            result, consultation = run_assertion(
                target,
                ctx,
                index=index,
                measures=measures,
                judge_model=judge_model,
                plan=approved_plan,
                limit_s=check_timeout_ms / 1000 if check_timeout_ms else None,
                earlier=results,
                case_threshold=resolved.case.threshold,
            )
        else:
            result = run_validator(
                target,
                ctx,
                name=check.name,
                source_ref=check.source_ref,
                limit_s=check_timeout_ms / 1000 if check_timeout_ms else None,
            )
        if consultation is not None:
            recorder.consultation(consultation)
        results.append(result)
        recorder.check(index, result)
    threshold = resolved.case.threshold
    decided = scoring_function_verdict([c.check for c in resolved.checks], results)
    if decided is not None:  # promptfoo's assertScoringFunction decides in place of the weights
        return Grade(results, decided[0], decided[1], threshold)
    return Grade(results, trial_passes(results, threshold), weighted_score(results), threshold)
