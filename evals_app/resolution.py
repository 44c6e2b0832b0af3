"""Turning an eval file's case into its resolved definition: the canonical JSON that a case
version snapshots and hashes, plus the captured source of its Python code.

Pure: no database. The catalog stores what this returns; the runner uses it to find which
callable each recorded check names.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath
from typing import Any

from evals_app import project_paths
from evals_app.bundle_archive import folder_files, pack_tree
from evals_app.environment_secrets import SECRET_NAME, as_references, secret_variables
from evals_app.source_capture import (
    capture_callable,
    project_root,
    read_source,
    relative_to_root,
)
from proctor.assertions import Assertion, assertion_extras
from proctor.conversations import Turns
from proctor.definitions import Case, Command, Files, Repo, Source, Suite, Variant
from proctor.judges import Judge
from proctor.mock import merged_mocks, mock_definition
from proctor.prompt_templates import filled, variables_in
from proctor.tasks import Task
from proctor.tools import Tool

# How a case and a variant are recorded. 2: with every value a trial runs with (paths into the
# project by the project token, credentials as references to their variable, what a check
# reads as digests); 1 hid a variant's env values and keys and kept what checks read as text.
RECORD_FORMAT = 2


def source_definition(source: Source | None, root: Path | None = None) -> dict[str, Any]:
    """The source as defined. A local repository inside the project is named by its path from
    the project root, so moving the project (or a worker's copy of it) keeps the definition."""
    if source is None:
        return {"kind": "empty"}
    if isinstance(source, Files):
        return {"kind": "files", "files": dict(sorted(source.files.items()))}
    if isinstance(source, Repo):
        if is_local_repo(source):
            inside = relative_to_root(Path(source.url), root) if root is not None else None
            return {"kind": "repo", "local": inside or source.url, "ref": source.ref}
        return {"kind": "repo", "url": source.url, "ref": source.ref}
    raise TypeError(f"unknown source {source!r}")


def is_local_repo(source: Source | None) -> bool:
    """A repo() naming a folder on this machine (``repo()`` made a relative path absolute)."""
    return isinstance(source, Repo) and source.url.startswith("/")


@dataclass
class ResolvedCheck:
    check: Any  # the SDK object or callable to run
    definition: dict[str, Any]
    source_ref: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.definition["name"]

    @property
    def kind(self) -> str:
        return self.definition["kind"]


@dataclass
class ResolvedCase:
    suite: Suite
    case: Case
    module_path: Path
    definition: dict[str, Any]
    definition_hash: str
    sources: dict[str, str]
    checks: list[ResolvedCheck]


def canonical_hash(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def resolve_case(
    suite: Suite, case: Case, module_path: Path, *, recorded_source: dict[str, Any] | None = None
) -> ResolvedCase:
    """The case's resolved definition, its hash, its captured sources and its checks.

    ``recorded_source`` stands in for the source's definition where the source itself is not
    here: a worker running a local repository from its commit bundle."""
    root = project_root(module_path)
    sources = _CapturedSources(root, keep=suite.capture_source)
    sources.add_module(module_path)
    checks = [_resolved_check(check, root, sources) for check in case.checks]
    definition = _case_definition(suite, case, root, checks, sources, recorded_source)
    return ResolvedCase(
        suite=suite,
        case=case,
        module_path=module_path,
        definition=definition,
        definition_hash=canonical_hash(_without_locations(definition)),
        sources=sources.texts,
        checks=checks,
    )


@dataclass
class _CapturedSources:
    """The text of each file the case's Python code comes from, by its path from the project
    root, gathered while the case is resolved; kept only when the suite captures its source."""

    root: Path
    keep: bool
    texts: dict[str, str] = field(default_factory=dict)

    def add_module(self, module_path: Path) -> None:
        relative = relative_to_root(module_path, self.root)
        if self.keep and relative is not None:
            self.texts[relative] = read_source(module_path)

    def reference(self, func: Any) -> dict[str, Any]:
        """How the definition names ``func``: its file, lines, qualname, source hash and the
        values it reads; its file's text is kept. Reads the file and inspects the code."""
        info = capture_callable(func, self.root)
        if self.keep and info.path is not None and info.text is not None:
            self.texts.setdefault(info.path, info.text)
        reads = values_read(func, self.root)
        # Only when it reads something, so a validator reading nothing keeps its hash.
        return {**info.reference(), "sha256": info.sha256, **({"reads": reads} if reads else {})}


def _resolved_check(check: Any, root: Path, sources: _CapturedSources) -> ResolvedCheck:
    if isinstance(check, Command):
        return ResolvedCheck(check, _command_definition(check, root))
    if isinstance(check, Assertion):
        return _resolved_assertion(check, root, sources)
    if isinstance(check, Judge):
        return ResolvedCheck(check, _judge_definition(check))
    ref = sources.reference(check)
    name = getattr(check, "__name__", None) or ref["qualname"]
    return ResolvedCheck(check, {"kind": "validator", "name": name, **ref}, _source_location(ref))


def _command_definition(check: Command, root: Path) -> dict[str, Any]:
    return {
        "kind": "command",
        # The project's own scripts by their path in it: moved, or on a worker, the command
        # runs the project's copy there (and its name, the command when it has no other, is
        # the same wherever the project sits).
        "name": project_paths.recorded(check.label, root),
        "command": project_paths.recorded(check.command, root),
        "timeout_ms": check.timeout_ms,
    }


def _resolved_assertion(check: Assertion, root: Path, sources: _CapturedSources) -> ResolvedCheck:
    spec: dict[str, Any] = {
        "kind": "assertion",
        "name": check.label,
        "type": check.type,
        "weight": check.weight,
        "metric": check.metric,
    }
    # promptfoo's extras only when set, so an assertion without them keeps its definition hash.
    spec.update(assertion_extras(check, lambda location: project_paths.recorded(location, root)))
    if check.type == "python" and callable(check.value):
        ref = sources.reference(check.value)
        spec.update(
            value=ref["qualname"], **{k: ref[k] for k in ("path", "start", "end", "sha256")}
        )
        return ResolvedCheck(check, spec, _source_location(ref))
    spec["value"] = check.value
    return ResolvedCheck(check, spec)


def _judge_definition(check: Judge) -> dict[str, Any]:
    return {
        "kind": "judge",
        "name": check.label,
        "rubric": check.rubric,
        "model": check.model,
        "threshold": check.threshold,
    }


def _source_location(ref: dict[str, Any]) -> dict[str, Any]:
    """Where a captured callable sits, for the trial page to show its code; empty when it is
    not in a file of the project."""
    return {k: ref[k] for k in ("path", "start", "end", "qualname")} if ref["path"] else {}


def _case_definition(
    suite: Suite,
    case: Case,
    root: Path,
    checks: list[ResolvedCheck],
    sources: _CapturedSources,
    recorded_source: dict[str, Any] | None,
) -> dict[str, Any]:
    """The canonical JSON a case version snapshots. Captures ``prepare`` and mock handlers."""
    definition: dict[str, Any] = {
        "suite": suite.id,
        "case": case.id,
        "prompt": filled(suite.prompt, dict(case.variables)),
        "system_prompt": suite.system_prompt,
        "source": recorded_source
        or source_definition(case.source if case.source is not None else suite.source, root),
        "prepare": sources.reference(case.prepare) if case.prepare is not None else None,
        "cache": {"key": case.cache.key, "path": case.cache.path} if case.cache else None,
        "limits": _limits(case),
        "conversation": {
            "user": _turns_filled(conversation_definition(case.user), suite.prompt, case.variables),
            "expected_output": case.expected_output,
            "plan_mode": case.plan_mode,
        },
        "checks": [c.definition for c in checks],
        "threshold": case.threshold,
    }
    if variables := recorded_variables(suite, case, checks):  # only then, likewise
        definition["variables"] = variables
    mocks = merged_mocks(suite.mocks, case.mocks)
    if mocks:  # only then, so a case without mocks keeps its version
        definition["mocks"] = [mock_definition(m, sources.reference) for m in mocks]
    if suite.diff_ignore:  # likewise
        definition["diff_ignore"] = list(suite.diff_ignore)
    if case.task is not None:  # likewise
        definition["task"] = task_definition(case.task, root)
    return definition


# The harness whose processes get every variable of the case (as PROCTOR_CASE_VARS).
VARIABLES_HARNESS = "command"


def recorded_variables(suite: Suite, case: Case, checks: list[ResolvedCheck]) -> dict[str, Any]:
    """The case's variables that reach its trials, recorded with it so a worker has them from
    the record alone: every one, as given, when something reads them all (a variant's
    command-harness process gets them as ``PROCTOR_CASE_VARS``, promptfoo's code in a check as
    ``context.vars``); else those its variants' own prompts and system prompts fill, as text.
    Nothing else, so a case whose variables reach nothing new keeps its version.

    A suite without variants is one rebuilt from a case's record: its case holds exactly the
    variables that were recorded, and they are kept as they are."""
    variants = [v for v in suite.variants if isinstance(v, Variant)]
    if (
        not suite.variants
        or any(v.harness == VARIABLES_HARNESS for v in variants)
        or any(_runs_code(c.check) for c in checks)
    ):
        return dict(sorted(case.variables.items()))
    names = {
        name
        for variant in variants
        for template in (variant.prompt, variant.system_prompt)
        if isinstance(template, str)
        for name in variables_in(template)
    }
    return {name: str(case.variables[name]) for name in sorted(names) if name in case.variables}


def _runs_code(check: Any) -> bool:
    """An assertion whose code (or transform) is given the case's vars."""
    return isinstance(check, Assertion) and (check.script is not None or bool(check.transform))


def trial_prompts(
    definition: dict[str, Any], variant_options: Mapping[str, Any]
) -> tuple[str, str | None]:
    """The prompt a trial of the case opens with and the system prompt it runs under: the
    variant's own (from its options, loaded or as recorded), filled with the case's recorded
    variables, else the case's (its suite's)."""
    variables = definition.get("variables") or {}
    prompt, system = variant_options.get("prompt"), variant_options.get("system_prompt")
    return (
        filled(prompt, variables) if isinstance(prompt, str) else definition["prompt"],
        filled(system, variables) if isinstance(system, str) else definition.get("system_prompt"),
    )


def trial_user(definition: dict[str, Any], variant_options: Mapping[str, Any], user: Any) -> Any:
    """The person's side a trial runs: a turn asking the case's prompt again with its own
    variables asks the variant's prompt when the variant carries one (as the opening does)."""
    prompt = variant_options.get("prompt")
    if not isinstance(user, Turns) or not isinstance(prompt, str):
        return user
    variables = definition.get("variables") or {}
    return Turns(
        tuple(
            replace(t, prompt=filled(prompt, {**variables, **t.variables}))
            if t.variables is not None
            else t
            for t in user.turns
        )
    )


def _turns_filled(user: Any, prompt: str | None, variables: Mapping[str, Any]) -> Any:
    """The recorded script with each turn given variables holding the case's prompt filled
    with them (over the case's variables)."""
    if not isinstance(user, dict) or user.get("type") != "turns":
        return user
    return {
        **user,
        "turns": [
            {**t, "prompt": filled(prompt or "", {**variables, **t["variables"]})}
            if t.get("variables") is not None and t.get("prompt") is None
            else t
            for t in user["turns"]
        ],
    }


def _limits(case: Case) -> dict[str, Any]:
    return {
        "max_turns": case.max_turns,
        "timeout_ms": case.timeout_ms,
        # Only when set, so a case that keeps the worker's defaults keeps its version.
        **{
            key: value
            for key, value in (
                ("check_timeout_ms", case.check_timeout_ms),
                ("prepare_timeout_ms", case.prepare_timeout_ms),
            )
            if value is not None
        },
    }


def task_definition(task: Task, root: Path) -> dict[str, Any]:
    """A task case's task as recorded: its folder by its path in the project (bundled with it)
    and by the digest of its files (reads every file), so an edited test makes a new version."""
    folder = Path(task.folder)
    return {
        **task.to_definition(),
        "folder": project_paths.recorded(task.folder, root),
        "digest": pack_tree(folder_files(folder)).digest if folder.is_dir() else None,
    }


class UndescribableValue(ValueError):
    """A validator or prepare reads a value with no stable description (its repr holds a
    memory address), so no case version could say what graded the trial."""


# A memory address in a repr (``<Client object at 0x7f…>``) differs on every run.
MEMORY_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")
# A value whose description is longer than this is recorded by its hash alone.
MAX_DESCRIBED_CHARS = 2_000


def values_read(func: Any, root: Path | None = None) -> dict[str, Any]:
    """What ``func`` closes over and the module globals it reads (its nested functions and
    comprehensions included, and the same-module helpers it calls, followed), each described
    stably and without its text: numbers and booleans by value, text by a digest, functions by
    their source's hash, modules and classes by name, paths inside the project by their path
    from ``root`` (so a worker's copy gives the same). Part of the case version: changing a
    threshold a validator reads makes a new version, and a token read from the environment
    is never stored, only its digest.

    Raises UndescribableValue naming the value when it has no stable description."""
    reads: dict[str, Any] = {}
    _collect_reads(inspect.unwrap(func), reads, set(), root)
    return dict(sorted(reads.items()))


def _collect_reads(func: Any, reads: dict[str, Any], seen: set[int], root: Path | None) -> None:
    code = getattr(func, "__code__", None)
    if code is None or id(func) in seen:
        return
    seen.add(id(func))
    cells = dict(zip(code.co_freevars, func.__closure__ or (), strict=False))
    for name, cell in cells.items():
        try:
            value = cell.cell_contents
        except ValueError:  # a cell not filled yet (a name assigned after the def)
            continue
        _read(func, name, value, reads, seen, root)
    module_globals = getattr(func, "__globals__", {})
    for name in _names(code):
        # Dunders (__file__, __name__) say where the module was loaded from, not what grades.
        if name in module_globals and name not in cells and not name.startswith("__"):
            _read(func, name, module_globals[name], reads, seen, root)


def _names(code: Any) -> list[str]:
    """Global names ``code`` and the code nested in it (lambdas, inner functions) may read."""
    names = list(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names.extend(_names(const))
    return list(dict.fromkeys(names))


def _read(
    func: Any, name: str, value: Any, reads: dict[str, Any], seen: set[int], root: Path | None
) -> None:
    if name in reads:
        return
    if inspect.isfunction(value):
        reads[name] = describe_option(value)
        if value.__module__ == func.__module__:
            _collect_reads(
                value, reads, seen, root
            )  # a helper of the same file: what it reads counts
        return
    reads[name] = describe_value(value, f"{name} (read by {func.__qualname__})", root)


def describe_value(value: Any, what: str, root: Path | None = None) -> Any:
    """``value`` as stable JSON that holds none of its text, or UndescribableValue naming
    ``what``."""
    if isinstance(value, str) and root is not None and _inside(value, root):
        # A path inside the project, read where a worker unpacked it too: the same value there.
        described: Any = {"path": value[len(str(root)) + 1 :] or "."}
    elif isinstance(value, str):
        return text_digest(value)
    elif isinstance(value, int | float | bool | type(None)):
        described = value
    elif isinstance(value, list | tuple):
        described = [describe_value(v, what, root) for v in value]
    elif isinstance(value, set | frozenset):
        items = (describe_value(v, what, root) for v in value)
        described = {"set": sorted(items, key=lambda item: json.dumps(item, sort_keys=True))}
    elif isinstance(value, dict):
        described = {
            str(k): describe_value(v, what, root)
            for k, v in sorted(value.items(), key=lambda item: str(item[0]))
        }
    elif isinstance(value, PurePath):
        inside = relative_to_root(Path(value), root) if root is not None else None
        return {"path": inside} if inside is not None else text_digest(str(value))
    elif inspect.ismodule(value):
        return {"module": value.__name__}
    elif inspect.isclass(value):
        return {"class": f"{value.__module__}.{value.__qualname__}"}
    elif callable(value):
        return describe_option(value)
    else:
        text = repr(value)
        if MEMORY_ADDRESS.search(text):
            raise UndescribableValue(
                f"{what} is a {type(value).__name__} whose repr holds a memory address, so the "
                "case version cannot record it; read it from the ctx, build it inside the "
                "validator, or give it a repr without an address"
            )
        return text_digest(text)
    encoded = json.dumps(described, sort_keys=True, default=str)
    if len(encoded) > MAX_DESCRIBED_CHARS:
        return {"sha256": hashlib.sha256(encoded.encode()).hexdigest()}
    return described


def _inside(path: str, root: Path) -> bool:
    return path == str(root) or path.startswith(str(root) + os.sep)


def text_digest(text: str) -> dict[str, str]:
    """Text a check reads, as recorded: a digest that changes with it and never shows it."""
    return {"sha256": hashlib.sha256(("proctor-read:" + text).encode()).hexdigest()[:16]}


def _without_locations(definition: dict[str, Any]) -> dict[str, Any]:
    """The definition as hashed: where a validator sits in its file (lines) is shown, but only
    its source decides whether the case changed, so moving it makes no new version."""

    def strip(entry: Any) -> Any:
        return (
            {k: v for k, v in entry.items() if k not in ("start", "end")}
            if isinstance(entry, dict)
            else entry
        )

    return {
        **definition,
        "prepare": strip(definition["prepare"]),
        "checks": [strip(c) for c in definition["checks"]],
    }


def conversation_definition(user: Any) -> Any:
    """The case's ``user`` setting as JSON (conversation kinds describe themselves)."""
    if user is None:
        return None
    describe = getattr(user, "to_definition", None)
    return describe() if callable(describe) else repr(user)


def profile_folder_digest(variant: Variant) -> str | None:
    """The digest of the variant's profile folder (reads every file in it), None without one."""
    if variant.profile is None or variant.profile.dir is None:
        return None
    folder = Path(variant.profile.dir)
    if not folder.is_dir():
        return None
    return pack_tree(folder_files(folder)).digest


def variant_spec(
    variant: Variant,
    profile_digest: str | None = None,
    *,
    root: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The variant as recorded: everything a worker needs to run it and that explains a
    result, read from nothing but this record when the trial runs.

    The profile folder is identified by its content's digest, not its path: editing the agent
    makes a new variant, moving or renaming the folder does not. Paths into the project
    (``root``) are named by the project token, so the record is the same wherever the project
    sits. A credential read from the environment (``environ``, this process's by default) is
    recorded as a reference to its variable, never as its value. Pass ``profile_digest`` when
    it is known (hashing the folder reads every file in it)."""
    secrets = secret_variables(os.environ if environ is None else environ)

    def kept(value: Any) -> Any:
        return project_paths.recorded(value, root) if root is not None else value

    profile = variant.profile
    profile_spec = None
    if profile is not None:
        digest = profile_digest or profile_folder_digest(variant)
        profile_spec = {
            "name": profile.name,
            # The folder by its content alone: renamed or moved, the same agent is the same
            # variant; a changed byte is a new one.
            "digest": digest,
            "run": kept(profile.run),
            "install": kept(profile.install),
            "env": {
                k: kept(as_references(v, secrets, prefer=k)) if isinstance(v, str) else v
                for k, v in sorted(profile.env.items())
            },
            "system_prompt": profile.system_prompt,
            "capabilities": list(profile.capabilities),
            "plan_file": profile.plan_file,
        }
    options = {}
    for key, value in sorted(variant.options.items()):
        if SECRET_NAME.search(key) and isinstance(value, str):
            value = as_references(value, secrets)
        options[key] = kept(describe_option(value))
    return {
        "name": variant.name,
        "harness": variant.harness,
        "model": variant.model,
        "sandbox": variant.sandbox,
        "network": variant.network,
        "profile": profile_spec,
        "options": options,
    }


def describe_option(value: Any) -> Any:
    """A variant option as stable JSON: tools by their schema and their stub's source hash,
    callables by name and source hash, so the same file always gives the same variant."""
    if isinstance(value, str | int | float | bool | type(None)):
        return value
    if isinstance(value, dict):
        return {str(k): describe_option(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [describe_option(v) for v in value]
    if isinstance(value, Tool):
        stub = describe_option(value.stub) if value.stub is not None else None
        return {"tool": value.to_openai()["function"], "stub": stub}
    if callable(value):
        try:
            source = inspect.getsource(value)
        except (OSError, TypeError):
            source = getattr(value, "__qualname__", repr(type(value)))
        return {
            "callable": getattr(value, "__qualname__", type(value).__name__),
            "sha256": hashlib.sha256(source.encode()).hexdigest()[:16],
        }
    return repr(value)
