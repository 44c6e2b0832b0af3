"""The eval's Python callables for a trial, and nothing else of its code.

A trial's data comes from its record (``evals_app.recorded_values``); what only code can give,
the validators, prepare, python assertions, mock handlers and tool stubs, comes from:

- the process that loaded the eval file and recorded the batch (``proctor eval`` and the
  workers it forks), which remembers what it loaded: no second import;
- anywhere else, the eval module imported from the run's bundle, each callable checked
  against the source digest and the values it reads as recorded, so a trial never runs code
  other than what its version names. A case whose checks are all data (commands, judges,
  assertions) imports nothing at all.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals_app.loading import LoadError, load_file
from evals_app.recorded_values import (
    Callables,
    callable_label,
    case_callables,
    recorded_case_callables,
    recorded_variant_callables,
    variant_callables,
)
from evals_app.resolution import UndescribableValue, describe_option, values_read
from evals_app.source_capture import capture_callable
from proctor.definitions import Suite, Variant


class CodeMismatch(Exception):
    """The code at hand is not the code the trial's version recorded; one sentence says why."""


# What this process loaded, by the case version's definition hash and the variant's spec hash.
# Equal hashes mean equal code: the hash covers every callable's source and what it reads.
_loaded_cases: dict[str, Callables] = {}
_loaded_variants: dict[str, Callables] = {}
# The project folders it loaded them from, by their bundle's digest.
_loaded_projects: dict[str, Path] = {}
_lock = threading.Lock()


def remember(
    cases: dict[str, Callables], variants: dict[str, Callables], projects: dict[str, Path]
) -> None:
    """Keep the callables of a batch this process loaded, and the project folders they came
    from, for its own trials (and those of the workers it forks)."""
    with _lock:
        _loaded_cases.update(cases)
        _loaded_variants.update(variants)
        _loaded_projects.update(projects)


def loaded_project(bundle: str) -> Path | None:
    """The folder this process loaded the project of ``bundle`` from, where it did: its first
    run finds the project's files where the eval file found them (an output folder it names
    included), not in the bundle's copy."""
    with _lock:
        return _loaded_projects.get(bundle)


def forget() -> None:
    """Forget what this process loaded: its trials then run as a worker elsewhere would."""
    with _lock:
        _loaded_cases.clear()
        _loaded_variants.clear()
        _loaded_projects.clear()


@dataclass(frozen=True)
class RecordedCode:
    """Which code a run's record names, and where to find it when this process did not load
    it: the eval module (in its bundle's folder) under the project root it belongs to."""

    definition: dict[str, Any]
    definition_hash: str
    version: int
    variant: dict[str, Any]
    variant_hash: str
    module: Path
    root: Path
    # Records made before reads were kept as digests describe them otherwise: only their
    # sources are compared.
    reads_comparable: bool


def callables_for(code: RecordedCode) -> Callables:
    """Every callable the run needs, by key. Raises CodeMismatch in one sentence."""
    wanted_case = recorded_case_callables(code.definition)
    wanted_variant = recorded_variant_callables(code.variant)
    with _lock:
        case_loaded = _loaded_cases.get(code.definition_hash)
        variant_loaded = _loaded_variants.get(code.variant_hash)
    if (case_loaded is not None or not wanted_case) and (
        variant_loaded is not None or not wanted_variant
    ):
        return {**(case_loaded or {}), **(variant_loaded or {})}
    return _imported(code, wanted_case, wanted_variant)


def _imported(
    code: RecordedCode, wanted_case: dict[str, dict], wanted_variant: dict[str, dict]
) -> Callables:
    where = f"the eval module of case {code.definition['case']} (v{code.version})"
    try:
        loaded = load_file(code.module)
    except LoadError as exc:
        raise CodeMismatch(f"{where}: {exc.problems[0]}") from None
    suite_id = code.definition["suite"]
    suite = next((s for s in loaded.suites if s.id == suite_id), None)
    found: Callables = {}
    if wanted_case:
        case = (
            next((c for c in suite.cases if c.id == code.definition["case"]), None)
            if suite
            else None
        )
        if suite is None or case is None:
            raise CodeMismatch(
                f"{where} no longer defines case {code.definition['case']} of suite {suite_id} "
                "when imported here, so its validators cannot be found (are its cases made "
                "from something this machine lacks?)"
            )
        found.update(case_callables(suite, case))
        for key, reference in wanted_case.items():
            _check(code, key, reference, found.get(key))
    if wanted_variant:
        variant = _variant(suite, code.variant["name"])
        if variant is None:
            raise CodeMismatch(
                f"{where} no longer defines variant {code.variant['name']} when imported here, "
                "so its tool stubs cannot be found"
            )
        stubs = variant_callables(variant)
        for key, reference in wanted_variant.items():
            stub = stubs.get(key)
            if stub is None or describe_option(stub) != reference:
                raise CodeMismatch(
                    f"{callable_label(key, reference, code.definition)} of variant "
                    f"{code.variant['name']} changed since version {code.version} was recorded"
                )
        found.update(stubs)
    return found


def _variant(suite: Suite | None, name: str) -> Variant | None:
    if suite is None:
        return None
    return next((v for v in suite.variants if v.name == name), None)


def _check(code: RecordedCode, key: str, reference: dict[str, Any], func: Any) -> None:
    label = callable_label(key, reference, code.definition)
    if func is None:
        raise CodeMismatch(
            f"{label} is no longer defined when the eval is imported here "
            f"(version {code.version} was recorded with it)"
        )
    if capture_callable(func, code.root).sha256 != reference.get("sha256"):
        raise CodeMismatch(f"{label} changed since version {code.version} was recorded")
    if not code.reads_comparable:
        return
    try:
        reads = values_read(func, code.root)
    except UndescribableValue as exc:
        raise CodeMismatch(f"{label}: {exc}") from None
    recorded = reference.get("reads") or {}
    for name in sorted(set(reads) | set(recorded)):
        if reads.get(name) != recorded.get(name):
            raise CodeMismatch(
                f"{label} reads {name}, whose value here differs from the one version "
                f"{code.version} was recorded with: the eval computes it at import from "
                "something this machine lacks or has otherwise (an environment variable, a "
                "file outside the project)"
            )
