"""promptfoo ``assert`` entries as Proctor assertions.

Types both know carry over with their weight and metric; ``latency`` and ``cost`` take
promptfoo's ``threshold`` as their bound.
Everything else (``javascript``, ``similar``, ``assert-set``, a ``transform``...) is named in
the untranslated list.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from proctor.assertions import LIST_VALUE_TYPES, TEXT_TYPES, TEXT_VALUE_TYPES
from runner.importers.nunjucks import fill_variables
from runner.importers.promptfoo.files import ConfigFiles, is_code_reference, is_reference
from runner.importers.python_source import Call, call

# Types promptfoo and Proctor share, read the same way.
SAME_TYPES = (*TEXT_TYPES, "llm-rubric")
BOUND_TYPES = ("latency", "cost")
# Keys of an assert entry this translation reads; any other is named as untranslated.
READ_KEYS = {"type", "value", "weight", "metric", "threshold"}
# CSV cells like "icontains: hello" or "similar(0.8): text" (promptfoo's short form).
_SHORT_FORM = re.compile(r"^(not-)?([a-z][a-z0-9-]*)(?:\((\d+(?:\.\d+)?)\))?(?::(.*))?$", re.DOTALL)
_SHORT_FORM_ALIASES = {"grade": "llm-rubric", "fn": "javascript", "eval": "javascript"}
_SHORT_FORM_TYPES = (
    *SAME_TYPES,
    *BOUND_TYPES,
    "javascript",
    "python",
    "llm-rubric",
    "similar",
    "starts-with",
    "icontains-any",
    "icontains-all",
    "contains-json",
    "levenshtein",
    "webhook",
    "rouge-n",
    "bleu",
    "factuality",
    "model-graded-closedqa",
    "answer-relevance",
    "perplexity",
    "classifier",
    "select-best",
)


@dataclass
class Translated:
    assertions: list[Call] = field(default_factory=list)
    untranslated: list[str] = field(default_factory=list)


def translate_assertions(
    entries: Any, *, where: str, variables: Mapping[str, Any], files: ConfigFiles
) -> Translated:
    """The assertions of one test (or of defaultTest); ``where`` names it in the list of what
    did not translate."""
    result = Translated()
    if entries is None:
        return result
    if not isinstance(entries, list):
        result.untranslated.append(f"{where}: assert (expected a list of assertions)")
        return result
    for position, entry in enumerate(entries, start=1):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("type"), str):
            result.untranslated.append(f"{where}: assert #{position} (no type)")
            continue
        translated = _one(
            entry, where=where, variables=variables, files=files, untranslated=result.untranslated
        )
        if translated is not None:
            result.assertions.append(translated)
    return result


def _one(
    entry: Mapping[str, Any],
    *,
    where: str,
    variables: Mapping[str, Any],
    files: ConfigFiles,
    untranslated: list[str],
) -> Call | None:
    kind = entry["type"]
    label = f"{where}: assertion {kind}"
    if kind not in (*SAME_TYPES, *BOUND_TYPES):
        hint = (
            " (write it as a Python function: assertion('python', fn))"
            if kind in ("javascript", "python")
            else ""
        )
        untranslated.append(f"{label}{hint}")
        return None
    for key in sorted(set(entry) - READ_KEYS):
        untranslated.append(f"{label}: {key}")
    weight = entry.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or weight < 0:
        untranslated.append(f"{label}: weight {weight!r} (not a number of 0 or more)")
        return None
    metric = entry.get("metric")
    if metric is not None and not isinstance(metric, str):
        metric = str(metric)
    value = entry.get("value")
    if kind in BOUND_TYPES:
        value = entry.get("threshold", value)
        if isinstance(value, bool) or not isinstance(value, int | float):
            untranslated.append(f"{label} (it needs a numeric threshold)")
            return None
    else:
        if "threshold" in entry:
            untranslated.append(f"{label}: threshold")
        value = _resolved_value(
            value, label=label, variables=variables, files=files, untranslated=untranslated
        )
        if value is _UNUSABLE:
            return None
    if kind == "is-json" and value is not None:
        untranslated.append(f"{label}: its JSON schema (only the JSON check carried over)")
        value = None
    if kind in LIST_VALUE_TYPES and isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if kind in LIST_VALUE_TYPES and isinstance(value, list):
        value = [str(item) for item in value]
    if kind in TEXT_VALUE_TYPES and isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if kind in TEXT_VALUE_TYPES and value is not None and not isinstance(value, str):
        untranslated.append(f"{label} (its value is not text)")
        return None
    if kind not in ("is-json",) and value is None:
        untranslated.append(f"{label} (it has no value)")
        return None
    args = (kind,) if value is None else (kind, value)
    return call("assertion", *args, weight=None if weight == 1 else weight, metric=metric)


_UNUSABLE = object()


def _resolved_value(
    value: Any,
    *,
    label: str,
    variables: Mapping[str, Any],
    files: ConfigFiles,
    untranslated: list[str],
) -> Any:
    """The value with ``{{vars}}`` filled and a ``file://`` reference read."""
    if is_reference(value):
        if is_code_reference(value):
            untranslated.append(f"{label}: value {value} (code)")
            return _UNUSABLE
        value = files.text(f"{label}: value", value).strip()
    if isinstance(value, str):
        return fill_variables(value, variables)
    if isinstance(value, Sequence):
        return [
            fill_variables(item, variables) if isinstance(item, str) else item for item in value
        ]
    return value


def assertions_from_short_form(cell: str) -> dict[str, Any]:
    """A CSV ``__expected`` cell as an assert entry, the way promptfoo reads it."""
    text = cell.strip()
    lowered = text.lower()
    for prefix, kind in (
        ("grade:", "llm-rubric"),
        ("llm-rubric:", "llm-rubric"),
        ("javascript:", "javascript"),
        ("fn:", "javascript"),
        ("eval:", "javascript"),
        ("python:", "python"),
    ):
        if lowered.startswith(prefix):
            return {"type": kind, "value": text[len(prefix) :].strip()}
    match = _SHORT_FORM.match(text)
    if match:
        negated, kind, threshold, value = match.groups()
        kind = _SHORT_FORM_ALIASES.get(kind, kind)
        if kind in _SHORT_FORM_TYPES:
            entry: dict[str, Any] = {"type": f"{negated or ''}{kind}"}
            if value is not None:
                entry["value"] = value.strip()
            if threshold is not None:
                entry["threshold"] = float(threshold)
            return entry
    return {"type": "equals", "value": text}
