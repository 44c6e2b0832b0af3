"""Eval files written as JSON (``*.eval.json``), in the shape of the conversation reference:

    {"id": "add-request-caching", "prompt": "...", "expected_output": "...",
     "responder": {"type": "llm", "max_turns": 8}, "plan_mode": true}

A file holds one such case, a list of them, or a suite object
``{"suite": ID, "name", "variants": [...], "trials", "source", "evals": [...]}``. A file without
``variants`` takes them from ``variants.json`` in its folder (a list of variant objects). Checks
are ``validate`` (a shell command, or a list of ``{"command": ..., "name", "timeout_ms"}`` and
``{"judge": rubric}``) and ``assertions`` (rubrics, each a judge, or weighted assertion objects
``{"type", "value", "weight", "metric", "name"}``), together; a case with no
checks but an ``expected_output`` is graded by a judge against it. Unlike a Python file's
``validate``, the list may hold commands: a JSON file has no validator to run one from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from proctor.assertions import assertion
from proctor.conversations import responder, turn, turns
from proctor.definitions import (
    DEFAULT_COMMAND_TIMEOUT_MS,
    DEFAULT_MAX_TURNS,
    DEFAULT_TIMEOUT_MS,
    Case,
    Command,
    Suite,
    Variant,
    case,
    command,
    files,
    profile,
    repo,
    suite,
    variant,
)
from proctor.judges import judge
from proctor.rules import EVAL_JSON_SUFFIX, Problem

VARIANTS_FILE = "variants.json"
CASE_KEYS = {
    "id",
    "name",
    "prompt",
    "expected_output",
    "turns",
    "responder",
    "plan_mode",
    "validate",
    "assertions",
    "threshold",
    "tags",
    "max_turns",
    "timeout_ms",
    "source",
}


class JsonEvalError(Exception):
    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(map(str, problems)))
        self.problems = problems


def _source(value: Any, base: Path) -> Any:
    if value is None:
        return None
    if isinstance(value, dict) and isinstance(value.get("files"), dict):
        return files({str(k): str(v) for k, v in value["files"].items()})
    if isinstance(value, dict) and isinstance(value.get("repo"), str):
        spec = value["repo"]
        if spec.startswith(("./", "../")):
            spec = str((base / spec).resolve())
        return repo(spec)
    raise ValueError('source must be {"files": {...}} or {"repo": "owner/name@ref"}')


# A variant object's own keys; any other is one of the harness's or sandbox's options (image,
# cpus, prices...), which the variant rules name when unknown, as for a Python file.
VARIANT_KEYS = {"harness", "name", "model", "profile", "sandbox", "network"}
PROFILE_KEYS = {
    "name",
    "dir",
    "run",
    "install",
    "env",
    "system_prompt",
    "capabilities",
    "plan_file",
}


def _variant(value: Any, base: Path) -> Variant:
    if not isinstance(value, dict) or not isinstance(value.get("harness"), str):
        raise ValueError('each variant needs a "harness"')
    prof = value.get("profile")
    built = None
    if isinstance(prof, dict):
        if unknown := sorted(set(prof) - PROFILE_KEYS):
            raise ValueError(
                f"variant {value.get('name') or value['harness']}: profile has unknown field "
                f"{', '.join(unknown)} (known: {', '.join(sorted(PROFILE_KEYS))})"
            )
        folder = prof.get("dir")
        env = prof.get("env") or {}
        built = profile(
            str(prof.get("name", "profile")),
            dir=str((base / folder).resolve()) if isinstance(folder, str) else None,
            run=prof.get("run"),
            install=prof.get("install"),
            # Numbers as text, as the environment holds them; anything else for the rules.
            env={
                k: str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
                for k, v in env.items()
            }
            if isinstance(env, dict)
            else env,
            system_prompt=prof.get("system_prompt"),
            capabilities=prof.get("capabilities") or (),
            plan_file=prof.get("plan_file"),
        )
    elif prof is not None:
        raise ValueError(
            f"variant {value.get('name') or value['harness']}: profile must be an object, like "
            '{"name": "scripted", "run": "bash agent.sh"}'
        )
    return variant(
        value["harness"],
        model=value.get("model"),
        profile=built,
        sandbox=value.get("sandbox", "local"),
        name=value.get("name"),
        network=value.get("network", False),
        **{key: option for key, option in value.items() if key not in VARIANT_KEYS},
    )


def _checks(entry: dict[str, Any], base: Path) -> Any:
    validate = entry.get("validate")
    checks: list[Any] = []
    if isinstance(validate, str):
        # With the assertions below, if any (they were once dropped beside a command).
        checks.append(command(validate))
    elif isinstance(validate, list):
        for item in validate:
            if isinstance(item, dict) and isinstance(item.get("command"), str):
                checks.append(
                    command(
                        item["command"],
                        name=item.get("name"),
                        timeout_ms=item.get("timeout_ms", DEFAULT_COMMAND_TIMEOUT_MS),
                    )
                )
            elif isinstance(item, dict) and isinstance(item.get("judge"), str):
                checks.append(
                    judge(
                        item["judge"],
                        model=item.get("model"),
                        name=item.get("name"),
                        threshold=item.get("threshold", 0.5),  # checked with the case
                    )
                )
            else:
                raise ValueError('validate entries are {"command": ...} or {"judge": rubric}')
    elif validate is not None:
        raise ValueError("validate must be a shell command or a list")
    checks.extend(_assertions(entry.get("assertions"), base))
    if not checks and isinstance(entry.get("expected_output"), str):
        checks.append(
            judge(
                "The agent's work achieves this expected outcome: " + entry["expected_output"],
                name="meets expected_output",
            )
        )
    if len(checks) == 1 and isinstance(checks[0], Command):
        return checks[0]  # as a Python file writes a lone command()
    return checks or None


ASSERTION_FIELDS = ("type", "value", "weight", "metric", "name", "threshold", "transform", "grader")


def _assertions(items: Any, base: Path) -> list[Any]:
    """Each entry of ``assertions``: a rubric (text) a judge grades by, or a weighted
    assertion ``{"type", "value", "weight", "metric", "name", ...}`` as Python's
    ``assertion()`` takes, checked by the same rules. A lone rubric is a list of one. A
    ``file://`` code reference is read relative to the JSON file."""
    if items is None:
        return []
    if isinstance(items, str | dict):
        items = [items]
    if not isinstance(items, list):
        raise ValueError("assertions must be a list of rubrics or assertion objects")
    checks: list[Any] = []
    for position, item in enumerate(items, start=1):
        if isinstance(item, str):
            checks.append(judge(item))
        elif isinstance(item, dict) and "type" in item:
            unknown = sorted(set(item) - set(ASSERTION_FIELDS))
            if unknown:
                raise ValueError(
                    f"assertions[{position}]: unknown field {unknown[0]!r} "
                    f"(an assertion has {', '.join(ASSERTION_FIELDS)})"
                )
            checks.append(
                assertion(
                    item["type"],
                    item.get("value"),
                    weight=item.get("weight", 1.0),
                    metric=item.get("metric"),
                    name=item.get("name"),
                    threshold=item.get("threshold"),
                    transform=item.get("transform"),
                    grader=item.get("grader"),
                    folder=str(base),
                )
            )
        else:
            raise ValueError(
                f"assertions[{position}] must be a rubric (text) or an assertion object "
                f'like {{"type": "icontains", "value": "booked", "weight": 2}} (got {item!r:.80})'
            )
    return checks


def _conversation(entry: dict[str, Any]) -> Any:
    has_turns, has_responder = "turns" in entry, "responder" in entry
    if has_turns and has_responder:
        raise ValueError("declares both turns and a responder; they are alternatives, choose one")
    if has_turns:
        items = entry["turns"]
        if not isinstance(items, list):
            raise ValueError("turns must be a list")
        return turns(
            *[
                turn(
                    str(t.get("prompt", "")),
                    deliver_when=t.get("deliver_when", "always"),
                    agent_response_matches=t.get("agent_response_matches"),
                )
                if isinstance(t, dict)
                else turn(str(t))
                for t in items
            ]
        )
    if has_responder:
        spec = entry["responder"]
        if not isinstance(spec, dict) or spec.get("type") != "llm":
            raise ValueError('responder needs "type": "llm" (the only responder)')
        return responder(max_turns=spec.get("max_turns", 8), model=spec.get("model"))
    return None


def _default_max_turns(entry: dict[str, Any]) -> Any:
    """A case that declares only its responder's budget gets room for all of it."""
    spec = entry.get("responder")
    wanted = spec.get("max_turns") if isinstance(spec, dict) else None
    if isinstance(wanted, int) and not isinstance(wanted, bool) and wanted > DEFAULT_MAX_TURNS:
        return wanted
    return DEFAULT_MAX_TURNS


def _case(entry: Any, base: Path) -> Case:
    if not isinstance(entry, dict):
        raise ValueError("each eval is a JSON object")
    unknown = sorted(set(entry) - CASE_KEYS)
    if unknown:
        raise ValueError(f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    if not isinstance(entry.get("prompt"), str):
        raise ValueError("prompt is required")
    return case(
        entry.get("id", ""),
        name=entry.get("name"),
        variables={"prompt": entry["prompt"]},
        source=_source(entry.get("source"), base),
        tags=entry.get("tags") or (),  # a lone tag is one, as in Python
        user=_conversation(entry),
        max_turns=entry.get("max_turns", _default_max_turns(entry)),
        timeout_ms=entry.get("timeout_ms", DEFAULT_TIMEOUT_MS),
        expected_output=entry.get("expected_output"),
        plan_mode=entry.get("plan_mode", False),
        validate=_checks(entry, base),
        threshold=entry.get("threshold"),
    )


def load_json_suites(path: Path) -> list[Suite]:
    """The suite a JSON eval file defines. Raises JsonEvalError naming the file and the rule."""
    shown = path.name
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise JsonEvalError([Problem(file=shown, message=f"is not valid JSON: {exc}")]) from None
    meta: dict[str, Any] = {}
    if isinstance(data, dict) and "evals" in data:
        meta, entries = data, data["evals"]
    else:
        entries = data if isinstance(data, list) else [data]
    suite_id = meta.get("suite") or path.name.removesuffix(EVAL_JSON_SUFFIX)
    try:
        raw_variants = meta.get("variants")
        if raw_variants is None:
            sibling = path.parent / VARIANTS_FILE
            if not sibling.is_file():
                raise ValueError(
                    f'has no "variants" and there is no {VARIANTS_FILE} beside it to take them from'
                )
            try:
                raw_variants = json.loads(sibling.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise ValueError(f"{VARIANTS_FILE} is not valid JSON: {exc}") from None
            if isinstance(raw_variants, dict) and "variants" in raw_variants:
                raw_variants = raw_variants["variants"]
        if not isinstance(raw_variants, list):
            raise ValueError(
                'variants are a list of variant objects, like [{"harness": "command", '
                '"profile": {"run": "bash agent.sh"}}]'
            )
        variants = [_variant(v, path.parent) for v in raw_variants]
        source = _source(meta.get("source"), path.parent)
        if not isinstance(entries, list):
            raise ValueError('"evals" is a list of eval objects')
    except ValueError as exc:
        raise JsonEvalError([Problem(file=shown, suite=str(suite_id), message=str(exc))]) from None
    cases, problems = [], []
    for position, entry in enumerate(entries, start=1):
        try:
            cases.append(_case(entry, path.parent))
        except ValueError as exc:
            named = isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"]
            problems.append(
                Problem(
                    file=shown,
                    suite=str(suite_id),
                    case=entry["id"] if named else None,
                    message=str(exc) if named else f"eval {position}: {exc}",
                )
            )
    if problems:
        raise JsonEvalError(problems)
    return [
        suite(
            str(suite_id),
            name=meta.get("name"),
            prompt="{{prompt}}",
            cases=cases,
            variants=variants,
            trials=meta.get("trials", 1),
            source=source,
            system_prompt=meta.get("system_prompt"),
        )
    ]
