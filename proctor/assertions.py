"""Weighted assertions: checks scored 0 to 1 and weighed by how much they matter.

A case's ``threshold`` (0 to 1) passes it when the weighted score of its assertions reaches it;
without one, every assertion with a weight above zero must pass. Weight 0 is information only:
recorded and charted, never deciding.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor.scripts import Script, caller_folder, script

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
    "contains-json",
    "icontains-any",
    "icontains-all",
    "starts-with",
    "not-starts-with",
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
    "starts-with",
    "not-starts-with",
    "model-graded-closedqa",
)
LIST_VALUE_TYPES = ("contains-any", "contains-all", "icontains-any", "icontains-all")
# Types whose value may be a JSON schema the output must match.
SCHEMA_TYPES = ("is-json", "contains-json")
# Types graded by running code: JavaScript with Node, Python natively.
SCRIPT_TYPES = ("javascript", "python")
# Types comparing embeddings of the output and the value (one text or a list of texts).
SIMILARITY_TYPES = ("similar", "not-similar")
# Types checking the tool calls the agent made against the tools its variant declares.
TOOL_CALL_TYPES = ("is-valid-openai-tools-call", "is-valid-openai-function-call")
# Types a model grades; ``grader`` names the model.
MODEL_GRADED_TYPES = ("llm-rubric", "model-graded-closedqa")
# A named metric computed from the trial's other named metrics (promptfoo's derivedMetrics):
# information only, it never decides the trial.
DERIVED_METRIC = "derived-metric"
# promptfoo's assertScoringFunction: code given the trial's named scores that decides the
# trial's pass and score in place of the weighted score (it comes last among the assertions).
SCORING_FUNCTION = "scoring-function"
# Types that read a mock's call log: the value is "MOCK CALL" ("billing POST /refunds",
# "gh pr create", "tickets create_ticket"); call-count takes {"call": ..., "count"|"min"|"max": n}.
CALL_TYPES = ("called", "not-called", "call-count")
ASSERTION_TYPES = (
    *TEXT_TYPES,
    *MODEL_GRADED_TYPES,
    *SCRIPT_TYPES,
    *SIMILARITY_TYPES,
    *TOOL_CALL_TYPES,
    DERIVED_METRIC,
    SCORING_FUNCTION,
    "latency",
    "cost",
    "turn-count",
    *CALL_TYPES,
)
# Types whose value is a number bound: the trial passes when its measure is at most the value.
BOUND_TYPES = ("latency", "cost", "turn-count")
# Types that may be written with promptfoo's ``not-`` prefix beyond those defined with one:
# graded as the type, then the verdict inverted as promptfoo inverts it (runner.grading:
# assertions._inverted, and scripts.graded for code).
NEGATABLE_TYPES = (
    "equals",
    "is-json",
    "contains-json",
    "contains-any",
    "contains-all",
    "icontains-any",
    "icontains-all",
    *SCRIPT_TYPES,
    "llm-rubric",
)
NEGATION_PREFIX = "not-"


def negated_type(written: str) -> str | None:
    """The type a ``not-`` form negates ("not-equals": "equals"); None for any other type,
    those defined with the prefix (not-contains) included."""
    if written in ASSERTION_TYPES or not written.startswith(NEGATION_PREFIX):
        return None
    base = written.removeprefix(NEGATION_PREFIX)
    return base if base in NEGATABLE_TYPES else None


@dataclass(frozen=True)
class Assertion:
    type: str
    value: Any = None
    weight: float = 1.0
    metric: str | None = None
    name: str | None = None
    # Passes at or above this score (similar: the similarity; a script returning a number:
    # that number); None: the type's own rule.
    threshold: float | None = None
    # JavaScript or Python applied to the output before grading, in order (a case-wide
    # transform first, then the assertion's own), as promptfoo's ``transform``.
    transform: tuple[Script, ...] = ()
    # A javascript assertion's code, or a python one's written as text.
    script: Script | None = None
    # The model that grades (llm-rubric, model-graded-closedqa) or embeds (similar).
    grader: str | None = None
    # promptfoo's ``not-`` prefix on a type defined without one: the verdict inverted.
    inverse: bool = False
    # promptfoo's rubricPrompt: the grading prompt a model-graded type sends in place of its
    # own, a template of {{output}} and {{rubric}} (closed QA: {{input}}, {{criteria}},
    # {{completion}}) and the vars; text, or a JSON list of chat messages.
    rubric_prompt: str | None = None
    # promptfoo's assertion ``config``: given to javascript and python code as context.config.
    config: dict[str, Any] | None = None

    @property
    def written_type(self) -> str:
        """The type as the eval wrote it: with its ``not-`` when inverted."""
        return f"{NEGATION_PREFIX}{self.type}" if self.inverse else self.type

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.metric:
            return self.metric
        kind = self.written_type
        if self.script is not None and not self.script.inline:
            return f"{kind}: {self.script.shown()}"
        if self.type == "python" and callable(self.value):
            return getattr(self.value, "__name__", "python")
        shown = self.value if isinstance(self.value, str | int | float) else ""
        text = f"{kind}: {shown}" if shown != "" else kind
        return text if len(text) <= 80 else text[:77] + "…"


def assertion(
    type: str,
    value: Any = None,
    *,
    weight: float = 1.0,
    metric: str | None = None,
    name: str | None = None,
    threshold: float | None = None,
    transform: str | Sequence[str] | None = None,
    grader: str | None = None,
    rubric_prompt: str | None = None,
    config: dict[str, Any] | None = None,
    folder: str | None = None,
) -> Assertion:
    """``assertion("icontains", "booked", weight=2, metric="disposition")``.

    Text types read what the agent said (``equals`` and ``is-json`` its final answer);
    ``llm-rubric`` is graded by a model; ``python`` takes a callable ``f(ctx)`` returning a bool,
    a score or a Verdict; ``latency`` (milliseconds of agent time), ``cost`` (USD) and
    ``turn-count`` (the person's messages) pass at or under ``value``.

    promptfoo's forms too: ``javascript`` and ``python`` take code as text (an expression, a
    function body, or ``"file://checks.js:fn"`` read now, relative to this file) called with
    ``output`` and ``context``; ``similar`` compares embeddings (``threshold``, default 0.75);
    ``transform`` is code applied to the output first; ``grader`` is the grading model;
    ``rubric_prompt`` the grading prompt of a model-graded type; ``config`` is what code reads
    as ``context.config``. ``not-`` before equals, is-json, contains-json, the contains-any/all
    types, javascript, python or llm-rubric inverts the verdict as promptfoo does.
    ``folder``: where relative ``file://`` paths are read from, when not beside this file.
    """
    base = Path(folder) if folder is not None else caller_folder(1)
    negated = negated_type(type)
    type = negated or type
    code = None
    if type in (*SCRIPT_TYPES, SCORING_FUNCTION) and isinstance(value, str):
        language = None if type == SCORING_FUNCTION else type
        if language is None and not value.startswith("file://"):
            language = "javascript"
        code = script(value, language=language, folder=base)
    if isinstance(transform, str):
        transform = [transform]
    transforms = tuple(
        script(t, language=None if t.startswith("file://") else "javascript", folder=base)
        for t in transform or ()
    )
    return Assertion(
        type=type,
        value=value,
        weight=weight,
        metric=metric,
        name=name,
        threshold=threshold,
        transform=transforms,
        script=code,
        grader=grader,
        inverse=negated is not None,
        rubric_prompt=rubric_prompt,
        config=config,
    )


PythonAssertion = Callable[..., Any]


def assertion_extras(
    item: Assertion, place: Callable[[str], str] = lambda location: location
) -> dict[str, Any]:
    """How a case version records an assertion's threshold, transforms, code and grader:
    only those set, so one without them keeps its definition (and its hash). ``place`` writes
    a code file's location as the record keeps it (by its place in the project)."""
    extras: dict[str, Any] = {}
    if item.threshold is not None:
        extras["threshold"] = item.threshold
    if item.transform:
        extras["transform"] = [_script_record(t, place) for t in item.transform]
    if item.script is not None:
        extras["script"] = _script_record(item.script, place)
    if item.grader is not None:
        extras["grader"] = item.grader
    if item.inverse:
        extras["inverse"] = True
    if item.rubric_prompt is not None:
        extras["rubric_prompt"] = item.rubric_prompt
    if item.config is not None:
        extras["config"] = item.config
    return extras


def rebuilt_extras(
    spec: dict[str, Any], place: Callable[[str], str] = lambda location: location
) -> dict[str, Any]:
    """The keyword arguments of Assertion that ``assertion_extras`` recorded; ``place`` finds a
    code file's recorded location where the trial runs."""
    script_record = spec.get("script")
    return {
        "threshold": spec.get("threshold"),
        "transform": tuple(_rebuilt_script(t, place) for t in spec.get("transform") or ()),
        "script": _rebuilt_script(script_record, place) if script_record else None,
        "grader": spec.get("grader"),
        "inverse": bool(spec.get("inverse")),
        "rubric_prompt": spec.get("rubric_prompt"),
        "config": spec.get("config"),
    }


def _script_record(code: Script, place: Callable[[str], str]) -> dict[str, Any]:
    record = code.as_record()
    if code.location is not None:
        record["location"] = place(code.location)
    return record


def _rebuilt_script(record: dict[str, Any], place: Callable[[str], str]) -> Script:
    code = Script.from_record(record)
    if code.location is None:
        return code
    return dataclasses.replace(code, location=place(code.location))
