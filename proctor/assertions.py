"""Weighted assertions: checks scored 0 to 1 and weighed by how much they matter.

A case's ``threshold`` (0 to 1) passes it when the weighted score of its assertions reaches it;
without one, every assertion with a weight above zero must pass. Weight 0 is information only:
recorded and charted, never deciding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TEXT_TYPES = (
    "contains",
    "not-contains",
    "icontains",
    "not-icontains",
    "contains-any",
    "contains-all",
    "regex",
    "not-regex",
    "equals",
    "is-json",
)
# The shapes of the types' values: one text (a word to find, a pattern, the answer, a rubric),
# or a list of texts.
TEXT_VALUE_TYPES = (
    "contains",
    "not-contains",
    "icontains",
    "not-icontains",
    "regex",
    "not-regex",
    "equals",
    "llm-rubric",
)
LIST_VALUE_TYPES = ("contains-any", "contains-all")
# Types that read a mock's call log: the value is "MOCK CALL" ("billing POST /refunds",
# "gh pr create", "tickets create_ticket"); call-count takes {"call": ..., "count"|"min"|"max": n}.
CALL_TYPES = ("called", "not-called", "call-count")
ASSERTION_TYPES = (
    *TEXT_TYPES,
    "llm-rubric",
    "python",
    "latency",
    "cost",
    "turn-count",
    *CALL_TYPES,
)
# Types whose value is a number bound: the trial passes when its measure is at most the value.
BOUND_TYPES = ("latency", "cost", "turn-count")


@dataclass(frozen=True)
class Assertion:
    type: str
    value: Any = None
    weight: float = 1.0
    metric: str | None = None
    name: str | None = None

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.metric:
            return self.metric
        if self.type == "python":
            return getattr(self.value, "__name__", "python")
        shown = self.value if isinstance(self.value, str | int | float) else ""
        text = f"{self.type}: {shown}" if shown != "" else self.type
        return text if len(text) <= 80 else text[:77] + "…"


def assertion(
    type: str,
    value: Any = None,
    *,
    weight: float = 1.0,
    metric: str | None = None,
    name: str | None = None,
) -> Assertion:
    """``assertion("icontains", "booked", weight=2, metric="disposition")``.

    Text types read what the agent said (``equals`` and ``is-json`` its final answer);
    ``llm-rubric`` is graded by a model; ``python`` takes a callable ``f(ctx)`` returning a bool,
    a score or a Verdict; ``latency`` (milliseconds of agent time), ``cost`` (USD) and
    ``turn-count`` (the person's messages) pass at or under ``value``.
    """
    return Assertion(type=type, value=value, weight=weight, metric=metric, name=name)


PythonAssertion = Callable[..., Any]
