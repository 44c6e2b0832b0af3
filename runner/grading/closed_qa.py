"""``model-graded-closedqa``: a model answers whether the output meets a criterion, ending its
answer with Y or N, as promptfoo's closed-QA grader (OpenAI's closedqa eval) asks it to. The
answer's last character decides: Y passes, N fails, anything else is a malformed answer.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from runner.core.results import CheckResult, ConsultationRecord, clip
from runner.grading.judges import (
    MALFORMED_VERDICT,
    VERDICT_FAILED,
    VERDICT_PASSED,
    custom_grading_prompt,
)
from runner.llm import LLMConfig, LLMError, complete

MAX_EVIDENCE_CHARS = 20_000

GRADING_PROMPT = """\
You are judging a submitted answer to a task against one criterion.
[BEGIN DATA]
***
[Task]: {task}
***
[Submission]: {submission}
***
[Criterion]: {criterion}
***
[END DATA]
Does the submission meet the criterion? Reason about it step by step first, so that your \
conclusion is sound, without giving the conclusion at the start. Then write only the letter \
"Y" or "N" on a line of its own, and repeat that letter alone on the last line."""


def closed_qa_prompt(task: str, submission: str, criterion: str) -> list[dict[str, str]]:
    text = GRADING_PROMPT.format(
        task=clip(task, MAX_EVIDENCE_CHARS // 4),
        submission=clip(submission, MAX_EVIDENCE_CHARS),
        criterion=criterion,
    )
    return [{"role": "user", "content": text}]


def run_closed_qa(
    criterion: str,
    *,
    task: str,
    submission: str,
    config: LLMConfig,
    name: str,
    index: int,
    rubric_prompt: str | None = None,
    variables: Mapping[str, Any] | None = None,
) -> tuple[CheckResult, ConsultationRecord]:
    """``rubric_prompt`` (promptfoo's) replaces the grading prompt: a template of
    ``{{input}}`` (the task), ``{{criteria}}``, ``{{completion}}`` and the ``variables``."""
    if rubric_prompt is not None:
        values = {**(variables or {}), "input": task, "criteria": criterion}
        prompt = custom_grading_prompt(rubric_prompt, {**values, "completion": submission})
    else:
        prompt = closed_qa_prompt(task, submission, criterion)
    started = time.monotonic()
    try:
        completion = complete(config, prompt)
        answer, cause, model, usage = completion.text, "", completion.model, completion.usage
    except LLMError as error:
        answer, cause, model, usage = "", error.cause, config.model or "", {}
        message = f"the grader could not be consulted: {error.cause}: {error.message}"
    duration_ms = int((time.monotonic() - started) * 1000)
    letter = answer.strip()[-1:].upper()
    passed = not cause and letter == "Y"
    if not cause:
        if letter == "Y":
            message = "the submission meets the criterion"
        elif letter == "N":
            message = "the submission does not meet the criterion"
        else:
            cause = MALFORMED_VERDICT
            message = f"the grader's answer ends in neither Y nor N: {answer.strip()[-120:]!r}"
    result = CheckResult(
        name=name,
        kind="assertion",
        passed=passed,
        message=message,
        score=float(passed),
        output=clip(answer),
        duration_ms=duration_ms,
    )
    record = ConsultationRecord(
        kind="judge",
        prompt=prompt,
        answer=answer,
        verdict=(VERDICT_PASSED if passed else VERDICT_FAILED) if not cause else "",
        reason=message,
        cause=cause,
        model=model,
        duration_ms=duration_ms,
        check_index=index,
        usage=usage,
    )
    return result, record
