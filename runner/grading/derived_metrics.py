"""promptfoo's ``derivedMetrics``: a named metric computed from the other named metrics, such as
``2 * precision * recall / (precision + recall)``.

A trial's named scores are promptfoo's: the sum of the scores of the assertions carrying each
metric. The expression is evaluated in Node over them (``^`` is a power, as in the mathjs
expressions promptfoo evaluates); a name the trial has no score for is 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from proctor.scripts import Script
from runner.core.results import CheckResult
from runner.grading.scripts import ScriptFailed, run_script

_NAME = re.compile(r"[A-Za-z_$][\w$]*")


def named_scores(results: Sequence[CheckResult]) -> dict[str, float]:
    scores: dict[str, float] = {}
    for result in results:
        if result.kind == "assertion" and result.metric and result.score is not None:
            scores[result.metric] = scores.get(result.metric, 0.0) + result.score
    return scores


def derived_metric(
    expression: str, scores: dict[str, float], *, limit_s: float
) -> tuple[float, str]:
    """(value, printed) of ``expression`` over ``scores``; raises ScriptFailed."""
    names = {name for name in _NAME.findall(expression) if name not in _JS_WORDS}
    known = {name: scores.get(name, 0.0) for name in names}
    body = f"with (context) {{\n  return ({expression.replace('^', '**')});\n}}"
    value, printed = run_script(
        Script(language="javascript", text=body), [None, known], limit_s=limit_s
    )
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ScriptFailed(f"{expression} came to {value!r}, not a finite number", printed)
    return float(value), printed


# Names an expression may use that are not metrics.
_JS_WORDS = {"Math", "Number", "true", "false", "null", "undefined", "NaN", "Infinity"}
