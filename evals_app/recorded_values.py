"""What a trial runs, rebuilt from its record: the case version's definition and the variant's
spec are the data; the eval's Python callables (validators, prepare, python assertions, mock
handlers, tool stubs) are the only thing taken from its code.

Both ends name each callable by the same key (``check 2``, ``prepare``, ``mock billing route
POST /refunds``, ``tool lookup``), so the callables of a loaded eval are matched to the record
without deriving anything else from the eval again.

Pure: no database. A record that cannot be read back raises ``UnreadableRecord``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from evals_app import project_paths
from evals_app.resolution import ResolvedCase, ResolvedCheck
from proctor.assertions import Assertion, rebuilt_extras
from proctor.conversations import Responder, SimulatedUser, Turn, Turns
from proctor.definitions import (
    DEFAULT_COMMAND_TIMEOUT_MS,
    Cache,
    Case,
    Command,
    Files,
    Profile,
    Repo,
    Source,
    Suite,
    Variant,
)
from proctor.judges import Judge
from proctor.mock import Mock, Output, Response, merged_mocks
from proctor.tasks import Task
from proctor.tools import Tool

Callables = dict[str, Callable[..., Any]]


class UnreadableRecord(ValueError):
    """A recorded definition or variant lacks what a trial needs (a record made by an older
    Proctor, or altered by hand); the message names what."""


# --- the callables of loaded values, by key ----------------------------------------------------


def case_callables(suite: Suite, case: Case) -> Callables:
    """The Python callables a case runs, by key."""
    found: Callables = {}
    for index, check in enumerate(case.checks):
        if isinstance(check, Command | Judge):
            continue
        if isinstance(check, Assertion):
            if check.type == "python" and callable(check.value):
                found[f"check {index}"] = check.value
            continue
        found[f"check {index}"] = check
    if case.prepare is not None:
        found["prepare"] = case.prepare
    for mock in merged_mocks(suite.mocks, case.mocks):
        found.update(_mock_callables(mock))
    return found


def _mock_callables(mock: Mock) -> Iterator[tuple[str, Callable[..., Any]]]:
    where = f"mock {mock.name}"
    if mock.kind == "api":
        for route, answer in mock.routes.items():
            if callable(answer):
                yield f"{where} route {route}", answer
    elif mock.kind == "cli":
        for index, (_pattern, reply) in enumerate((mock.script or {}).items()):
            if callable(reply):
                yield f"{where} script {index}", reply
        if mock.handler is not None:
            yield f"{where} handler", mock.handler
    else:
        for tool, func in mock.tools.items():
            yield f"{where} tool {tool}", func


def variant_callables(variant: Variant) -> Callables:
    """The Python callables a variant runs (its chat tools' stubs), by key."""
    tools = variant.options.get("tools") or ()
    return {f"tool {t.name}": t.stub for t in tools if isinstance(t, Tool) and t.stub is not None}


# --- the callables a record names, by key ------------------------------------------------------


def recorded_case_callables(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The captured reference (qualname, path, sha256, reads) of every callable the case
    version names, by key."""
    found: dict[str, dict[str, Any]] = {}
    for index, check in enumerate(definition.get("checks") or []):
        if check.get("kind") == "validator" or (
            check.get("kind") == "assertion"
            and check.get("type") == "python"
            and not check.get("script")  # code written as text travels in the record
        ):
            found[f"check {index}"] = check
    if definition.get("prepare"):
        found["prepare"] = definition["prepare"]
    for mock in definition.get("mocks") or []:
        where = f"mock {mock['name']}"
        if mock["kind"] == "api":
            for route, answer in (mock.get("routes") or {}).items():
                if "handler" in answer:
                    found[f"{where} route {route}"] = answer["handler"]
        elif mock["kind"] == "cli":
            for index, (_pattern, answer) in enumerate(mock.get("script") or []):
                if "handler" in answer:
                    found[f"{where} script {index}"] = answer["handler"]
            if mock.get("handler"):
                found[f"{where} handler"] = mock["handler"]
        else:
            for tool, entry in (mock.get("tools") or {}).items():
                found[f"{where} tool {tool}"] = entry["handler"]
    return found


def recorded_variant_callables(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The recorded description (callable, sha256) of each tool stub of the variant, by key."""
    tools = (spec.get("options") or {}).get("tools") or []
    return {
        f"tool {t['tool']['name']}": t["stub"]
        for t in tools
        if isinstance(t, dict) and isinstance(t.get("stub"), dict)
    }


def callable_label(key: str, reference: dict[str, Any], definition: dict[str, Any]) -> str:
    """How a message names a recorded callable: "validator wrote_mark in checks.py"."""
    name = reference.get("qualname") or reference.get("callable") or "?"
    if key.startswith("check "):
        check = definition["checks"][int(key.split()[1])]
        kind = "validator" if check["kind"] == "validator" else "python assertion"
        what = f"{kind} {check.get('name') or name}"
    elif key == "prepare":
        what = f"prepare {name}"
    elif key.startswith("tool "):
        what = f"the stub of {key} ({name})"
    else:
        what = f"{key} ({name})"
    path = reference.get("path")
    return f"{what} in {path}" if path else what


# --- values rebuilt from a record --------------------------------------------------------------


def _read_back(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A rebuilding function whose record lacks something raises UnreadableRecord naming it."""

    def decorate(rebuild: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(rebuild)
        def read(*args: Any, **kwargs: Any) -> Any:
            try:
                return rebuild(*args, **kwargs)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                missing = f"no {exc}" if isinstance(exc, KeyError) else str(exc)
                raise UnreadableRecord(f"its recorded {what} cannot be read ({missing})") from None

        return read

    return decorate


@_read_back("definition")
def rebuilt_case(
    definition: dict[str, Any],
    definition_hash: str,
    callables: Callables,
    *,
    module_path: Path,
    project: Path,
) -> ResolvedCase:
    """The case a trial runs, from its version's definition and the callables it names; the
    project's files are found in ``project`` (its bundle's copy). Raises UnreadableRecord."""
    checks = [_rebuilt_check(i, d, callables, project) for i, d in enumerate(definition["checks"])]
    limits = definition["limits"]
    conversation = definition.get("conversation") or {}
    cache = definition.get("cache")
    case = Case(
        id=definition["case"],
        validate=tuple(c.check for c in checks),
        # The variables that reach the trial (its prompt is recorded filled); records of the
        # first promptfoo assertions kept all of them apart, as "vars".
        variables={**(definition.get("vars") or {}), **(definition.get("variables") or {})},
        source=_rebuilt_source(definition.get("source")),
        prepare=callables.get("prepare") if definition.get("prepare") else None,
        cache=Cache(key=cache["key"], path=cache["path"]) if cache else None,
        user=_rebuilt_user(conversation.get("user")),
        max_turns=limits["max_turns"],
        timeout_ms=limits["timeout_ms"],
        expected_output=conversation.get("expected_output"),
        plan_mode=bool(conversation.get("plan_mode")),
        check_timeout_ms=limits.get("check_timeout_ms"),
        prepare_timeout_ms=limits.get("prepare_timeout_ms"),
        threshold=definition.get("threshold"),
        # Recorded merged: the suite's with the case's on top.
        mocks=tuple(_rebuilt_mock(m, callables) for m in definition.get("mocks") or []),
        task=Task.from_definition(project_paths.resolved(definition["task"], project))
        if definition.get("task")
        else None,
    )
    suite = Suite(
        id=definition["suite"],
        prompt=definition["prompt"],
        cases=(case,),
        variants=(),
        system_prompt=definition.get("system_prompt"),
        diff_ignore=tuple(definition.get("diff_ignore") or ()),
    )
    return ResolvedCase(
        suite=suite,
        case=case,
        module_path=module_path,
        definition=definition,
        definition_hash=definition_hash,
        sources={},
        checks=checks,
    )


def _rebuilt_check(
    index: int, spec: dict[str, Any], callables: Callables, project: Path
) -> ResolvedCheck:
    kind = spec["kind"]
    if kind == "command":
        # The name stays as recorded: results group by it on every machine.
        command = Command(
            command=project_paths.resolved(spec["command"], project),
            name=spec["name"],
            timeout_ms=spec.get("timeout_ms") or DEFAULT_COMMAND_TIMEOUT_MS,
        )
        return ResolvedCheck(command, spec)
    if kind == "judge":
        judge = Judge(
            rubric=spec["rubric"],
            model=spec["model"],
            name=spec["name"],
            threshold=spec["threshold"],
        )
        return ResolvedCheck(judge, spec)
    if kind == "assertion":
        python = spec["type"] == "python" and f"check {index}" in callables
        assertion = Assertion(
            type=spec["type"],
            value=callables[f"check {index}"] if python else spec.get("value"),
            weight=spec.get("weight", 1.0),
            metric=spec.get("metric"),
            name=spec["name"],
            **rebuilt_extras(spec, lambda location: project_paths.resolved(location, project)),
        )
        return ResolvedCheck(assertion, spec, _source_ref(spec) if python else {})
    return ResolvedCheck(callables[f"check {index}"], spec, _source_ref(spec))


def _source_ref(spec: dict[str, Any]) -> dict[str, Any]:
    if not spec.get("path"):
        return {}
    return {k: spec.get(k) for k in ("path", "start", "end", "qualname")}


def _rebuilt_source(spec: dict[str, Any] | None) -> Source | None:
    """The workspace's source; a local repository comes from its commit bundle instead (the
    worker passes it beside the case), so only its recorded path is kept here."""
    if not spec or spec.get("kind") in (None, "empty"):
        return None
    if spec["kind"] == "files":
        return Files(dict(spec["files"]))
    if spec["kind"] == "repo":
        return Repo(url=spec.get("url") or spec.get("local") or "", ref=spec.get("ref"))
    raise ValueError(f"unknown recorded source kind {spec['kind']!r}")


def _rebuilt_user(spec: Any) -> Any:
    if not isinstance(spec, dict):
        return None
    kind = spec.get("type")
    if kind == "turns":
        return Turns(
            tuple(
                Turn(
                    prompt=t["prompt"],
                    deliver_when=t["deliver_when"],
                    agent_response_matches=t.get("agent_response_matches"),
                    variables=t.get("variables"),
                )
                for t in spec["turns"]
            )
        )
    if kind == "llm":
        return Responder(max_turns=spec["max_turns"], model=spec.get("model"))
    if kind == "simulated_user":
        return SimulatedUser(
            instructions=spec["instructions"],
            first_message=spec.get("first_message"),
            max_turns=spec["max_turns"],
            model=spec.get("model"),
            initial_messages=tuple(
                (m["role"], m["content"]) for m in spec.get("initial_messages") or []
            ),
            persona_opens=spec.get("persona_opens", False),
        )
    raise ValueError(f"unknown recorded conversation type {kind!r}")


def _rebuilt_mock(spec: dict[str, Any], callables: Callables) -> Mock:
    name, kind = spec["name"], spec["kind"]
    where = f"mock {name}"
    if kind == "api":
        routes = {
            route: callables[f"{where} route {route}"]
            if "handler" in answer
            else _route_answer(answer)
            for route, answer in spec["routes"].items()
        }
        return Mock(kind=kind, name=name, routes=routes, env=spec["env"], host=spec.get("host"))
    if kind == "cli":
        script = None
        if spec.get("script") is not None:
            script = {
                pattern: callables[f"{where} script {index}"]
                if "handler" in answer
                else _script_answer(answer)
                for index, (pattern, answer) in enumerate(spec["script"])
            }
        handler = callables[f"{where} handler"] if spec.get("handler") else None
        return Mock(kind=kind, name=name, script=script, handler=handler)
    tools = spec["tools"]
    return Mock(
        kind=kind,
        name=name,
        tools={tool: callables[f"{where} tool {tool}"] for tool in tools},
        schema={tool: entry["schema"] for tool, entry in tools.items()},
        descriptions={tool: entry["description"] for tool, entry in tools.items()},
        env=spec["env"],
        host=spec.get("host"),
    )


def _route_answer(answer: dict[str, Any]) -> Any:
    """An HTTP mock's fixed answer as ``proctor.mock.mock_definition`` recorded it."""
    if "status" in answer:
        return Response(
            status=answer["status"],
            json=answer.get("json"),
            text=answer.get("text"),
            headers=dict(answer.get("headers") or {}),
        )
    if "text" in answer:
        return answer["text"]
    return answer.get("json")


def _script_answer(answer: dict[str, Any]) -> Any:
    """A command mock's fixed answer as ``proctor.mock.mock_definition`` recorded it."""
    if "stdout" in answer:
        return Output(stdout=answer["stdout"], stderr=answer["stderr"], exit=answer["exit"])
    if "text" in answer:
        return answer["text"]
    if "exit" in answer:
        return answer["exit"]
    return answer.get("json")


@_read_back("variant")
def rebuilt_variant(
    spec: dict[str, Any], callables: Callables, *, profile_dir: Path | None, project: Path
) -> Variant:
    """The variant a trial runs, from its recorded spec; the project's files are found in
    ``project`` (its bundle's copy). Raises UnreadableRecord."""
    profile = None
    if spec.get("profile") is not None:
        p = project_paths.resolved(spec["profile"], project)
        profile = Profile(
            name=p["name"],
            dir=str(profile_dir) if profile_dir is not None else None,
            run=p.get("run"),
            install=p.get("install"),
            env=dict(p.get("env") or {}),
            system_prompt=p.get("system_prompt"),
            capabilities=tuple(p.get("capabilities") or ()),
            plan_file=p.get("plan_file"),
        )
    options = {
        key: _rebuilt_tools(value, callables)
        if key == "tools"
        else project_paths.resolved(value, project)
        for key, value in (spec.get("options") or {}).items()
    }
    return Variant(
        harness=spec["harness"],
        model=spec.get("model"),
        profile=profile,
        sandbox=spec.get("sandbox") or "local",
        name=spec["name"],
        network=bool(spec.get("network")),
        options=options,
    )


def _rebuilt_tools(described: Any, callables: Callables) -> Any:
    if not isinstance(described, list):
        return described
    tools = []
    for item in described:
        function = item["tool"]
        tools.append(
            Tool(
                name=function["name"],
                description=function.get("description", ""),
                parameters=function.get("parameters") or {"type": "object", "properties": {}},
                stub=callables.get(f"tool {function['name']}") if item.get("stub") else None,
            )
        )
    return tools
