"""Grading weighted assertions, and combining them into a trial's score.

Text assertions read what the agent said across the conversation (``equals``, ``is-json`` and
the other promptfoo text types read its final answer); ``llm-rubric`` asks a model judge;
``python`` calls the eval's function; ``latency``, ``cost`` and ``turn-count`` compare a measure
of the trial with a bound. promptfoo's own forms (code, similarity, closed QA, tool calls,
derived metrics, a scoring function) are graded as promptfoo grades them, on its ``output``
after the assertion's transforms (see ``_promptfoo_verdict``).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proctor.assertions import (
    CALL_TYPES,
    DERIVED_METRIC,
    SCHEMA_TYPES,
    SCORING_FUNCTION,
    SCRIPT_TYPES,
    SIMILARITY_TYPES,
    TOOL_CALL_TYPES,
    Assertion,
)
from proctor.definitions import Verdict
from proctor.judges import Judge
from proctor.promptfoo_vars import promptfoo_vars
from runner.core.awaiting import resolved
from runner.core.limits import UserCodeError, default_limits, run_forked
from runner.core.mock_calls import call_assertion_verdict
from runner.core.results import CheckResult, ConsultationRecord, clip
from runner.grading.checks import CheckContext, checked_verdict
from runner.grading.closed_qa import run_closed_qa
from runner.grading.derived_metrics import derived_metric, named_scores
from runner.grading.json_output import json_verdict
from runner.grading.judges import custom_grading_prompt, judge_config, run_judge
from runner.grading.scripts import ScriptFailed, graded, run_script
from runner.grading.similarity import similarity_verdict
from runner.grading.tool_calls import tool_call_verdict
from runner.llm import LLMConfig, LLMError, resolve_config
from runner.llm.embeddings import DEFAULT_EMBEDDING_MODEL


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
    if kind in ("starts-with", "not-starts-with"):
        starts = answer.startswith(str(value))
        message = f"the output {'starts' if starts else 'does not start'} with {value!r}"
        return (not starts if kind.startswith("not-") else starts), message
    if kind in SCHEMA_TYPES:
        return json_verdict(kind, value, answer)
    if kind in ("contains-any", "contains-all", "icontains-any", "icontains-all"):
        fold = str.lower if kind.startswith("i") else str  # the i: case folded
        present = [v for v in _as_list(value) if fold(v) in fold(said)]
        missing = [v for v in _as_list(value) if v not in present]
        if kind.endswith("-any"):
            return bool(
                present
            ), f"found {present}" if present else f"none of {_as_list(value)} found"
        return not missing, f"missing {missing}" if missing else "all found"
    if kind in ("regex", "not-regex"):
        match = re.search(str(value), said)
        message = f"matched {match.group(0)!r}" if match else f"no match for /{value}/"
        return (match is None if kind == "not-regex" else match is not None), message
    if kind == "equals":
        same = answer.strip() == str(value).strip()
        return same, "the final answer equals the value" if same else "the final answer differs"
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
    earlier: Sequence[CheckResult] = (),
    case_threshold: float | None = None,
) -> tuple[CheckResult, ConsultationRecord | None]:
    """Grade one assertion; an assertion that breaks is a failed check saying why.

    ``project_llm`` is the project's model endpoint for ``llm-rubric`` (see ``judge_config``);
    ``limit_s`` bounds a ``python`` or ``javascript`` assertion and each transform (default:
    the worker's check limit); ``earlier`` are the trial's results so far, which a derived
    metric and a scoring function are computed from (the latter also given
    ``case_threshold``)."""
    started = time.monotonic()
    record = None
    output = ""
    limit = limit_s if limit_s is not None else default_limits().check_s
    try:
        transformed, output = _transformed_output(item, ctx, limit_s=limit)
        if transformed is not _UNTRANSFORMED:
            answer = said = _as_text(transformed)
        elif ctx.reads_whole_conversation:
            # As promptfoo grades its simulated user's tests: every assertion reads the whole
            # conversation, the person's messages included.
            answer = said = ctx.output()
        elif ctx.reads_last_answer_only:
            answer = said = ctx.answer()
        else:
            answer, said = ctx.answer(), ctx.transcript()
        # A python assertion holding a function is Proctor's own f(ctx); as text, promptfoo's.
        if item.type in PROMPTFOO_TYPES and not callable(item.value):
            untransformed = transformed is _UNTRANSFORMED
            (passed, score, message), printed, record = _promptfoo_verdict(
                item,
                ctx,
                answer=ctx.output() if untransformed else answer,
                raw_output=ctx.output() if untransformed else transformed,
                index=index,
                judge_model=judge_model,
                project_llm=project_llm,
                limit_s=limit,
                earlier=earlier,
                case_threshold=case_threshold,
            )
            output += printed
        elif item.type == "llm-rubric":
            rubric = Judge(rubric=str(item.value), name=item.label, model=item.grader)
            untransformed = transformed is _UNTRANSFORMED
            result, record = run_judge(
                rubric,
                ctx if untransformed else _OutputView(ctx, answer),
                config=judge_config(rubric, cli_model=judge_model, project_llm=project_llm),
                index=index,
                plan=plan,
                prompt=_rubric_prompt(item, ctx, ctx.output() if untransformed else answer),
            )
            passed, score, message = (
                result.passed,
                result.score if result.score is not None else float(result.passed),
                result.message,
            )
            if item.threshold is not None and score < item.threshold:
                passed = False
                message += f" (score {score:g} is below the threshold {item.threshold:g})"
            if item.inverse and not record.cause:  # a grader that failed fails either way
                passed, score, message = _inverted(item, passed, score, message)
        elif item.type == "python":
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
            passed, message = _text_verdict(item.type, item.value, said, answer)
            score = float(passed)
            if item.inverse:
                passed, score, message = _inverted(item, passed, score, message)
    except UserCodeError as exc:  # hung, raised or ended its process: that assertion fails
        passed, score, message, output = False, 0.0, str(exc), exc.printed
    except ScriptFailed as exc:  # promptfoo's code (or a transform) broke: likewise
        passed, score, message, output = False, 0.0, str(exc), output + exc.printed
    except LLMError as exc:  # no grader or embeddings to be had
        passed, score, message = False, 0.0, f"{exc.cause}: {exc.message}"
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
    check.metric = item.metric or item.written_type
    return check, record


def _inverted(item: Assertion, passed: bool, score: float, message: str) -> tuple[bool, float, str]:
    """promptfoo's ``not-`` form of a type defined without one: the pass inverted; the score
    follows it (1 or 0), except llm-rubric's, which becomes 1 − the grader's score. Code
    (javascript, python) is inverted where its answer is read (``graded``), as the score
    then depends on what it returned."""
    score = min(1.0, max(0.0, 1.0 - score)) if item.type == "llm-rubric" else float(not passed)
    verdict = "fails" if passed else "passes"
    return not passed, score, f"{message} ({item.written_type} {verdict})"


def _rubric_prompt(item: Assertion, ctx: CheckContext, output: str) -> list[dict[str, str]] | None:
    """The judge's messages from promptfoo's rubricPrompt, filled with the output, the rubric
    and the vars (the vars win, as in promptfoo); None without one."""
    if item.rubric_prompt is None:
        return None
    values = {"output": output, "rubric": str(item.value), **promptfoo_vars(ctx.variables())}
    return custom_grading_prompt(item.rubric_prompt, values)


# Types graded here as promptfoo grades them (runner.grading.scripts, similarity, closed_qa,
# tool_calls, derived metrics).
PROMPTFOO_TYPES = (
    *SCRIPT_TYPES,
    *SIMILARITY_TYPES,
    *TOOL_CALL_TYPES,
    "model-graded-closedqa",
    DERIVED_METRIC,
    SCORING_FUNCTION,
)
_UNTRANSFORMED = object()


class _OutputView(CheckContext):
    """The trial's check context with a transformed output as the agent's final answer, for a
    judge grading an assertion whose transform changed it."""

    def __init__(self, ctx: CheckContext, output: str) -> None:
        self.__dict__.update(vars(ctx))
        self._output = output

    def answer(self) -> str:
        return self._output


def _as_text(value: Any) -> str:
    """How promptfoo turns an output into text for text checks: objects as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value)


def script_context(ctx: CheckContext, item: Assertion | None = None) -> dict[str, Any]:
    """promptfoo's ``context`` argument: the vars, the prompt, the test, the assertion's
    config."""
    variables = promptfoo_vars(ctx.variables())
    return {
        "vars": variables,
        "prompt": ctx.prompt(),
        "test": {"vars": variables},
        "config": dict(item.config) if item is not None and item.config else {},
        "providerResponse": {"output": ctx.output()},
        **({"assertion": {"type": item.type, "threshold": item.threshold}} if item else {}),
    }


def _transformed_output(item: Assertion, ctx: CheckContext, *, limit_s: float) -> tuple[Any, str]:
    """(the output after the assertion's transforms, what they printed); _UNTRANSFORMED when
    it has none. A transform is called with the output and ``context`` ({vars, prompt})."""
    if not item.transform:
        return _UNTRANSFORMED, ""
    value: Any = ctx.output()
    printed = ""
    context = {"vars": promptfoo_vars(ctx.variables()), "prompt": ctx.prompt()}
    for code in item.transform:
        try:
            value, said = run_script(code, [value, context], limit_s=limit_s, purpose="transform")
        except ScriptFailed as exc:
            raise ScriptFailed(f"the transform failed: {exc}", printed + exc.printed) from None
        printed += said
    return value, printed


def _promptfoo_verdict(
    item: Assertion,
    ctx: CheckContext,
    *,
    answer: str,
    raw_output: Any,
    index: int,
    judge_model: str | None,
    project_llm: LLMConfig | None,
    limit_s: float,
    earlier: Sequence[CheckResult],
    case_threshold: float | None,
) -> tuple[tuple[bool, float, str], str, ConsultationRecord | None]:
    """((passed, score, message), printed, consultation) of a type promptfoo defines."""
    if item.type == SCORING_FUNCTION:
        assert item.script is not None, "proctor.rules requires code for a scoring function"
        components = [
            {"pass": r.passed, "score": r.score, "reason": r.message, "metric": r.metric}
            for r in earlier
            if r.kind == "assertion"
        ]
        value, printed = run_script(
            item.script,
            [named_scores(earlier), {"threshold": case_threshold, "componentResults": components}],
            limit_s=limit_s,
        )
        verdict = graded(
            value, language=item.script.language, threshold=None, shown=item.script.shown()
        )
        return verdict, printed, None
    if item.type in SCRIPT_TYPES:
        assert item.script is not None, "proctor.rules requires code for a script assertion"
        value, printed = run_script(
            item.script, [raw_output, script_context(ctx, item)], limit_s=limit_s
        )
        return (
            graded(
                value,
                language=item.script.language,
                threshold=item.threshold,
                shown=item.script.shown(),
                inverse=item.inverse,
            ),
            printed,
            None,
        )
    if item.type in SIMILARITY_TYPES:
        config = resolve_config(
            model_override=item.grader or DEFAULT_EMBEDDING_MODEL, project=project_llm
        )
        verdict = similarity_verdict(
            item.type, item.value, answer, threshold=item.threshold, config=config
        )
        return verdict, "", None
    if item.type in TOOL_CALL_TYPES:
        passed, message = tool_call_verdict(item.type, ctx.tool_calls(), ctx.declared_tools())
        return (passed, float(passed), message), "", None
    if item.type == "model-graded-closedqa":
        config = resolve_config(model_override=judge_model or item.grader, project=project_llm)
        result, record = run_closed_qa(
            str(item.value),
            task=ctx.prompt(),
            submission=answer,
            config=config,
            name=item.label,
            index=index,
            rubric_prompt=item.rubric_prompt,
            variables=promptfoo_vars(ctx.variables()),
        )
        return (result.passed, result.score or 0.0, result.message), result.output, record
    value, printed = derived_metric(str(item.value), named_scores(earlier), limit_s=limit_s)
    return (True, value, f"{item.metric} = {value:g}"), printed, None


def scoring_function_verdict(
    checks: Sequence[Any], results: Sequence[CheckResult]
) -> tuple[bool, float | None] | None:
    """(passed, score) as the case's scoring function decided them (every other kind of check
    must still pass); None when the case has none."""
    decided = [
        result
        for check, result in zip(checks, results, strict=True)
        if isinstance(check, Assertion) and check.type == SCORING_FUNCTION
    ]
    if not decided:
        return None
    others_pass = all(r.passed for r in results if r.kind != "assertion")
    return others_pass and decided[-1].passed, decided[-1].score


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
