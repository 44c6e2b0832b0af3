"""promptfoo ``assert`` entries as Proctor assertions.

Types both know carry over with their weight, metric and threshold; ``latency`` and ``cost``
take promptfoo's ``threshold`` as their bound. ``javascript`` and ``python`` keep their code
(inline, or the ``file://`` reference made relative to the eval file) and their ``config``;
an assertion's ``transform`` and the test's ``options.transform`` become its transforms, the
grader (``provider``, ``options.provider``) its ``grader``, ``rubricPrompt`` (the
assertion's, else ``options.rubricPrompt``) a model-graded type's ``rubric_prompt``; the
``not-`` prefix carries over on the types Proctor negates as promptfoo does. Anything else is
named in the untranslated list.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proctor.assertions import (
    DERIVED_METRIC,
    LIST_VALUE_TYPES,
    MODEL_GRADED_TYPES,
    SCHEMA_TYPES,
    SCORING_FUNCTION,
    SCRIPT_TYPES,
    SIMILARITY_TYPES,
    TEXT_TYPES,
    TEXT_VALUE_TYPES,
    TOOL_CALL_TYPES,
    negated_type,
)
from proctor.scripts import JAVASCRIPT_SUFFIXES, PYTHON_SUFFIXES, split_reference
from runner.importers.nunjucks import as_text, fill_variables
from runner.importers.promptfoo.files import (
    STRUCTURED_SUFFIXES,
    ConfigFiles,
    is_code_reference,
    is_reference,
    read_yaml,
)
from runner.importers.python_source import Call, call

# Types promptfoo and Proctor share, read the same way.
SAME_TYPES = (
    *TEXT_TYPES,
    *MODEL_GRADED_TYPES,
    *SCRIPT_TYPES,
    *SIMILARITY_TYPES,
    *TOOL_CALL_TYPES,
)
BOUND_TYPES = ("latency", "cost")
# Keys of an assert entry this translation reads; any other is named as untranslated.
READ_KEYS = {
    "type",
    "value",
    "weight",
    "metric",
    "threshold",
    "transform",
    "provider",
    "config",
    "rubricPrompt",
}
# promptfoo's similarity metric suffix: only cosine similarity carries over.
SIMILAR_COSINE = ("similar:cosine", "not-similar:cosine")
# Keys of a test's ``options`` this translation reads.
# A test's options that carry over: transforms, the grader, and text put around the prompt
# (the prompt is then rendered per test).
OPTIONS_READ = {"transform", "provider", "prefix", "suffix", "rubricPrompt"}
# A provider id's prefixes before the model's name, for the grading model.
_GRADER_PREFIXES = (
    "openai:chat:",
    "openai:embedding:",
    "openai:embeddings:",
    "openai:",
    "anthropic:messages:",
    "anthropic:",
    "azureopenai:chat:",
)


@dataclass(frozen=True)
class TestOptions:
    """What a test's ``options`` (over defaultTest's) give it: transforms applied to the output
    first, the grading and embedding models, and promptfoo's ``prefix`` and ``suffix``, text
    put around the rendered prompt."""

    transform: tuple[str, ...] = ()
    grader: str | None = None
    embedder: str | None = None
    prefix: str = ""
    suffix: str = ""
    # promptfoo's rubricPrompt, as text (a list of messages as its JSON).
    rubric_prompt: str | None = None


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
    entries: Any,
    *,
    where: str,
    variables: Mapping[str, Any],
    files: ConfigFiles,
    options: TestOptions | None = None,
    output_dir: Path | None = None,
) -> Translated:
    """The assertions of one test (or of defaultTest); ``where`` names it in the list of what
    did not translate. ``options`` are the test's; ``output_dir`` is where the eval file goes
    (a ``file://`` code reference is made relative to it)."""
    result = Translated()
    reader = _Reader(files, output_dir or files.base, options or TestOptions())
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
            entry,
            where=where,
            variables=variables,
            reader=reader,
            untranslated=result.untranslated,
        )
        if translated is not None:
            result.assertions.append(translated)
    return result


@dataclass(frozen=True)
class _Reader:
    files: ConfigFiles
    output_dir: Path
    options: TestOptions

    def code_reference(self, reference: str) -> str:
        """``file://x.js:fn`` as the eval file names it: relative to where it is written."""
        raw, name = split_reference(reference)
        function = f":{name}" if name else ""
        path = self.files.path("file://" + raw)
        if not path.is_file():
            raise self.files.fail("code", reference, f"{path} does not exist")
        relative = os.path.relpath(path.resolve(), self.output_dir)
        return f"file://{Path(relative).as_posix()}{function}"


def _one(
    entry: Mapping[str, Any],
    *,
    where: str,
    variables: Mapping[str, Any],
    reader: _Reader,
    untranslated: list[str],
) -> Call | None:
    written = kind = entry["type"]
    label = f"{where}: assertion {kind}"
    if kind in SIMILAR_COSINE:
        written = kind = kind.split(":")[0]
    if kind == "not-model-graded-closedqa":
        # promptfoo's closed-QA handler never reads the prefix: it grades as the plain type.
        untranslated.append(f"{label} (promptfoo ignores not- here; write the criterion negated)")
        return None
    kind = negated_type(kind) or kind
    if kind not in (*SAME_TYPES, *BOUND_TYPES):
        untranslated.append(label)
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
    threshold = entry.get("threshold")
    if threshold is not None and (
        isinstance(threshold, bool) or not isinstance(threshold, int | float)
    ):
        untranslated.append(f"{label}: threshold {threshold!r} (not a number)")
        return None
    transforms = _transforms(entry.get("transform"), label, reader, untranslated)
    if transforms is None:
        return None
    grader = _assertion_grader(entry.get("provider"), kind, label, reader, untranslated)
    config = _config(entry.get("config"), kind, label, untranslated)
    rubric_prompt = None
    if kind in MODEL_GRADED_TYPES:
        rubric_prompt = reader.options.rubric_prompt
        if "rubricPrompt" in entry:
            rubric_prompt = rubric_prompt_text(
                entry["rubricPrompt"], f"{label}: rubricPrompt", reader.files, untranslated.append
            )
    elif "rubricPrompt" in entry:
        untranslated.append(f"{label}: rubricPrompt (only model-graded types read it)")
    value = entry.get("value")
    if kind in BOUND_TYPES:
        value = entry.get("threshold", value)
        threshold = None
        if isinstance(value, bool) or not isinstance(value, int | float):
            untranslated.append(f"{label} (it needs a numeric threshold)")
            return None
    elif kind in SCRIPT_TYPES:
        value = _code(value, label, variables, reader, untranslated)
        if value is None:
            return None
    elif kind in SCHEMA_TYPES:
        value = _schema(value, label, reader, untranslated)
        if value is _UNUSABLE:
            return None
    elif kind in TOOL_CALL_TYPES:
        if value is not None:
            untranslated.append(f"{label}: value (the variant's declared tools are checked)")
        value = None
    else:
        value = _resolved_value(
            value, label=label, variables=variables, files=reader.files, untranslated=untranslated
        )
        if value is _UNUSABLE:
            return None
    if kind in LIST_VALUE_TYPES and isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if kind in (*LIST_VALUE_TYPES, *SIMILARITY_TYPES) and isinstance(value, list):
        value = [str(item) for item in value]
    if kind in TEXT_VALUE_TYPES and isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if kind in TEXT_VALUE_TYPES and value is not None and not isinstance(value, str):
        untranslated.append(f"{label} (its value is not text)")
        return None
    if kind not in (*SCHEMA_TYPES, *TOOL_CALL_TYPES) and value is None:
        untranslated.append(f"{label} (it has no value)")
        return None
    args = (written,) if value is None else (written, value)
    return call(
        "assertion",
        *args,
        weight=None if weight == 1 else weight,
        metric=metric,
        threshold=threshold,
        transform=(transforms[0] if len(transforms) == 1 else transforms) or None,
        grader=grader,
        rubric_prompt=rubric_prompt,
        config=config,
    )


def _config(raw: Any, kind: str, label: str, untranslated: list[str]) -> dict[str, Any] | None:
    """An assertion's ``config``: promptfoo gives it to code as ``context.config``."""
    if raw is None:
        return None
    if kind not in SCRIPT_TYPES:
        untranslated.append(f"{label}: config (only javascript and python code reads it)")
        return None
    if not isinstance(raw, Mapping):
        untranslated.append(f"{label}: config (not a mapping)")
        return None
    return dict(raw)


def rubric_prompt_text(
    raw: Any, where: str, files: ConfigFiles, skip: Callable[[str], None]
) -> str | None:
    """promptfoo's rubricPrompt as text: as written, a list of messages (or a file holding
    one) as its JSON, a text file's contents."""
    if is_reference(raw):
        if files.path(raw).suffix in STRUCTURED_SUFFIXES:
            raw = files.structured(where, raw)
        else:
            raw = files.text(where, raw)
    if isinstance(raw, list | Mapping):
        return json.dumps(raw)
    if not isinstance(raw, str) or not raw.strip():
        skip(f"{where} (not a grading prompt)")
        return None
    return raw


def _code(
    value: Any,
    label: str,
    variables: Mapping[str, Any],
    reader: _Reader,
    untranslated: list[str],
) -> str | None:
    """A javascript or python assertion's code: inline (its ``{{vars}}`` filled, as promptfoo
    renders it) or a file reference relative to the eval file."""
    if not isinstance(value, str) or not value.strip():
        untranslated.append(f"{label} (its value is not code)")
        return None
    if is_reference(value):
        return reader.code_reference(value)
    return fill_variables(value, variables)


def _schema(value: Any, label: str, reader: _Reader, untranslated: list[str]) -> Any:
    """is-json's and contains-json's schema: a mapping, or a JSON or YAML file holding one."""
    if value is None:
        return None
    if is_reference(value) and reader.files.path(value).suffix in STRUCTURED_SUFFIXES:
        value = reader.files.structured(f"{label}: value", value)
    elif isinstance(value, str):
        with contextlib.suppress(Exception):  # not YAML (nor JSON): named below
            value = read_yaml(value)
    if not isinstance(value, Mapping):
        untranslated.append(f"{label}: value (not a JSON schema)")
        return _UNUSABLE
    return dict(value)


def _transforms(raw: Any, label: str, reader: _Reader, untranslated: list[str]) -> list[str] | None:
    """The test's transforms then the assertion's own; None when one cannot be carried."""
    written = []
    for case_wide in reader.options.transform:  # as the config wrote it
        converted = _transform(case_wide, f"{label}: options.transform", reader, untranslated)
        if converted is None:
            return None
        written.append(converted)
    if raw is not None:
        own = _transform(raw, f"{label}: transform", reader, untranslated)
        if own is None:
            return None
        written.append(own)
    return written


def _transform(raw: Any, label: str, reader: _Reader, untranslated: list[str]) -> str | None:
    if not isinstance(raw, str) or not raw.strip():
        untranslated.append(f"{label} (not code)")
        return None
    if is_reference(raw):
        if Path(split_reference(raw)[0]).suffix not in (*JAVASCRIPT_SUFFIXES, *PYTHON_SUFFIXES):
            untranslated.append(f"{label} {raw} (a transform file is .js or .py)")
            return None
        return reader.code_reference(raw)
    return raw


def read_options(
    raw: Any, where: str, files: ConfigFiles, skip: Callable[[str], None], base: TestOptions
) -> TestOptions:
    """A test's ``options`` over defaultTest's (``base``): what is not read is named."""
    if raw is None:
        return base
    if not isinstance(raw, Mapping):
        skip(f"{where}: options (not a mapping)")
        return base
    for key in sorted(set(raw) - OPTIONS_READ):
        skip(f"{where}: options.{key}")
    transform = base.transform
    if "transform" in raw:
        reader = _Reader(files, files.base, TestOptions())
        untranslated: list[str] = []
        written = _transform(raw["transform"], f"{where}: options.transform", reader, untranslated)
        for item in untranslated:
            skip(item)
        # Kept as written in the config; translate_assertions re-reads file references.
        transform = (raw["transform"],) if written is not None else ()
    grader, embedder = base.grader, base.embedder
    if "provider" in raw:
        grader, embedder = _grader_models(raw["provider"], f"{where}: options.provider", skip)
    prefix = as_text(raw["prefix"]) if "prefix" in raw else base.prefix
    suffix = as_text(raw["suffix"]) if "suffix" in raw else base.suffix
    rubric_prompt = base.rubric_prompt
    if "rubricPrompt" in raw:
        rubric_prompt = rubric_prompt_text(
            raw["rubricPrompt"], f"{where}: options.rubricPrompt", files, skip
        )
    return TestOptions(transform, grader, embedder, prefix, suffix, rubric_prompt)


def _grader_models(
    raw: Any, where: str, skip: Callable[[str], None]
) -> tuple[str | None, str | None]:
    """(grading model, embedding model) of promptfoo's grader provider: an id, ``{id}``, or
    ``{text: ..., embedding: ...}``."""
    if isinstance(raw, Mapping) and ("text" in raw or "embedding" in raw):
        text = _provider_model(raw.get("text"), f"{where}.text", skip) if "text" in raw else None
        embedding = (
            _provider_model(raw.get("embedding"), f"{where}.embedding", skip)
            if "embedding" in raw
            else None
        )
        return text, embedding
    model = _provider_model(raw, where, skip)
    provider_id = raw.get("id") if isinstance(raw, Mapping) else raw
    if isinstance(provider_id, str) and ":embedding" in provider_id:
        return None, model  # an embedding model grades nothing but similarity
    return model, None


def _provider_model(raw: Any, where: str, skip: Callable[[str], None]) -> str | None:
    provider_id = raw.get("id") if isinstance(raw, Mapping) else raw
    if not isinstance(provider_id, str):
        skip(f"{where} (no provider id)")
        return None
    if isinstance(raw, Mapping):
        for key in sorted(set(raw) - {"id", "label"}):
            skip(f"{where}: {key}")
    for prefix in _GRADER_PREFIXES:
        if provider_id.startswith(prefix) and provider_id[len(prefix) :]:
            return provider_id[len(prefix) :]
    skip(f"{where} {provider_id} (the grader is a model on the project's endpoint)")
    return None


def _assertion_grader(
    raw: Any, kind: str, label: str, reader: _Reader, untranslated: list[str]
) -> str | None:
    """The assertion's own grading model, else the test's: the embedding model for
    ``similar``, the grading model for a model-graded type, none for the others."""
    grader, embedder = reader.options.grader, reader.options.embedder
    if raw is not None:
        grader, embedder = _grader_models(raw, f"{label}: provider", untranslated.append)
        embedder = embedder or grader
    if kind in SIMILARITY_TYPES:
        return embedder
    if kind in MODEL_GRADED_TYPES:
        return grader
    return None


def derived_metric_assertions(raw: Any, skip: Callable[[str], None]) -> list[Call]:
    """promptfoo's ``derivedMetrics`` as information-only assertions each case ends with."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        skip("derivedMetrics (not a list)")
        return []
    found = []
    for position, item in enumerate(raw, start=1):
        name = item.get("name") if isinstance(item, Mapping) else None
        value = item.get("value") if isinstance(item, Mapping) else None
        if not isinstance(name, str) or not name.strip():
            skip(f"derivedMetrics #{position} (no name)")
        elif not isinstance(value, str) or not value.strip() or is_reference(value):
            skip(f"derivedMetrics {name} (only an expression carries over)")
        else:
            found.append(call("assertion", DERIVED_METRIC, value, metric=name, weight=0))
    return found


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


def scoring_function_assertion(
    raw: Any, where: str, files: ConfigFiles, output_dir: Path, skip: Callable[[str], None]
) -> Call | None:
    """promptfoo's ``assertScoringFunction`` (code, or a ``file://`` reference) as the
    assertion that decides the case's pass and score from its named scores."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.strip():
        skip(f"{where}: assertScoringFunction (not code or a file reference)")
        return None
    if is_reference(raw):
        raw = _Reader(files, output_dir, TestOptions()).code_reference(raw)
    return call("assertion", SCORING_FUNCTION, raw, weight=0)
