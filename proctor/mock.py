"""Mocks the agent talks to during a trial: an HTTP API, a command-line tool, an MCP server.

``from proctor import mock``; a case (or its suite) takes ``mocks=[...]``::

    mock.api("billing", routes={
        "GET /orders/{id}": {"id": 42, "total": 30},          # a fixed JSON answer
        "POST /refunds": refund,                               # refund(request, state)
    })
    mock.cli("gh", script={"pr create *": "https://github.com/o/r/pull/1"})
    mock.mcp("tickets", tools={"create_ticket": create_ticket})

Each trial gets its own servers (outside the workspace, on loopback) and its own ``state``
dict per mock; every call is logged and reaches checks as ``ctx.mocks["billing"]``. Plain
Python: nothing here imports Django or the runner.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from proctor.definitions import a_type

KINDS = ("api", "cli", "mcp")
NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
# A route's path placeholder, as runner/mocks/api.py reads it.
PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# An mcp mock's fields that map its tool names, and to what.
MCP_MAPPINGS = {
    "tools": "tool names to functions",
    "schema": "tool names to JSON schemas",
    "descriptions": "tool names to text",
}
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
# A host name the agent may reach a mock at (``billing.internal``): DNS labels, lowercase.
HOST = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$"
)
# The sandbox that cannot give the agent's processes their own /etc/hosts.
HOSTLESS_SANDBOX = "local"


@dataclass(frozen=True)
class Response:
    """A fixed HTTP answer: ``mock.response(201, json={...})``."""

    status: int = 200
    json: Any = None
    text: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def to_definition(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "json": self.json,
            "text": self.text,
            "headers": dict(sorted(self.headers.items())),
        }


def response(
    status: int = 200,
    *,
    json: Any = None,
    text: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """An HTTP answer with a JSON body (``json=``) or a text body (``text=``)."""
    return Response(status=status, json=json, text=text, headers=dict(headers or {}))


@dataclass(frozen=True)
class Output:
    """What a mocked command prints and exits with: ``mock.output(stdout="...", exit=0)``."""

    stdout: str = ""
    stderr: str = ""
    exit: int = 0

    def to_definition(self) -> dict[str, Any]:
        return {"stdout": self.stdout, "stderr": self.stderr, "exit": self.exit}


def output(stdout: str = "", *, stderr: str = "", exit: int = 0) -> Output:
    return Output(stdout=stdout, stderr=stderr, exit=exit)


# A route answers with a fixed Response, a dict/list (JSON, 200), a str (text, 200), or a
# callable(request, state) returning any of those.
RouteAnswer = Response | Mapping[str, Any] | list | str | Callable[..., Any]
ScriptAnswer = Output | str | int | Callable[..., Any]


@dataclass(frozen=True)
class Mock:
    """One mock of a case. ``kind`` is api, cli or mcp; the other fields belong to one kind."""

    kind: str
    name: str
    routes: Mapping[str, RouteAnswer] = field(default_factory=dict)
    env: str | None = None  # the variable holding an api's or mcp's URL (default NAME_URL)
    script: Mapping[str, ScriptAnswer] | None = None
    handler: Callable[..., Any] | None = None
    tools: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    schema: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    descriptions: Mapping[str, str] = field(default_factory=dict)
    # A host name the sandbox resolves to the mock (an api's or mcp's), None for 127.0.0.1.
    host: str | None = None

    @property
    def env_var(self) -> str:
        """The environment variable the agent finds this mock's base URL in."""
        return self.env or re.sub(r"[^A-Z0-9]", "_", self.name.upper()) + "_URL"

    def tool_schema(self, tool: str) -> dict[str, Any]:
        """The JSON schema of ``tool``'s arguments: the one given, else read from the
        function's parameters (``state`` excluded)."""
        if tool in self.schema:
            return dict(self.schema[tool])
        return schema_from_signature(self.tools[tool])

    def tool_description(self, tool: str) -> str:
        if tool in self.descriptions:
            return self.descriptions[tool]
        return inspect.getdoc(self.tools[tool]) or tool.replace("_", " ")


def api(
    name: str,
    *,
    routes: Mapping[str, RouteAnswer],
    env: str | None = None,
    host: str | None = None,
) -> Mock:
    """An HTTP API for the trial. ``routes`` maps ``"METHOD /path/{param}"`` to an answer;
    a callable answer gets ``(request, state)``. Unknown routes answer 404 and are logged.
    The agent finds the base URL in ``NAME_URL`` (or ``env``); with ``host="billing.internal"``
    it is ``http://billing.internal:<port>``, the name resolving inside the sandbox (bwrap and
    docker only)."""
    return Mock(kind="api", name=name, routes=_mapping(routes), env=env, host=host)


def cli(
    name: str,
    *,
    script: Mapping[str, ScriptAnswer] | Sequence[tuple[str, ScriptAnswer]] | None = None,
    handler: Callable[..., Any] | None = None,
) -> Mock:
    """A command ``name`` first on the agent's PATH. ``script`` maps argument patterns
    (``"pr create *"``, shell-style wildcards over the arguments joined by spaces) to an
    answer: an ``output(...)``, a str (stdout, exit 0) or an int (exit code), first match
    wins; ``handler(call, state)`` answers instead when given."""
    return Mock(
        kind="cli", name=name, script=None if script is None else _mapping(script), handler=handler
    )


def mcp(
    name: str,
    *,
    tools: Mapping[str, Callable[..., Any]],
    schema: Mapping[str, Mapping[str, Any]] | None = None,
    descriptions: Mapping[str, str] | None = None,
    env: str | None = None,
    host: str | None = None,
) -> Mock:
    """An MCP server exposing ``tools`` (name -> function called with the tool's arguments,
    plus ``state`` when it takes one). ``schema`` gives a tool's JSON schema; without it the
    function's parameters make one. Served over streamable HTTP (URL in ``NAME_URL``) and
    stdio, and wired into the agent CLIs that take MCP configuration. ``host`` names its
    HTTP address as for ``api``."""
    return Mock(
        kind="mcp",
        name=name,
        tools=_mapping(tools),
        schema=_mapping(schema or {}),
        descriptions=_mapping(descriptions or {}),
        env=env,
        host=host,
    )


def _mapping(value: Any) -> Any:
    """A copy of a mapping (or of a list of pairs); anything else is kept as given, for
    ``mock_problems`` to name."""
    try:
        return dict(value)
    except (TypeError, ValueError):
        return value


_JSON_TYPES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}


def schema_from_signature(func: Callable[..., Any]) -> dict[str, Any]:
    """A JSON object schema from ``func``'s parameters and their annotations."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return {"type": "object"}
    for parameter in signature.parameters.values():
        if parameter.name == "state" or parameter.kind in (
            parameter.VAR_POSITIONAL,
            parameter.VAR_KEYWORD,
        ):
            continue
        annotation = parameter.annotation
        if isinstance(annotation, str):
            # ``from __future__ import annotations`` leaves the annotation as text.
            by_name = {t.__name__: t for t in _JSON_TYPES}
            annotation = by_name.get(annotation.split("|")[0].split("[")[0].strip())
        json_type = (
            _JSON_TYPES.get(annotation) if annotation is not inspect.Parameter.empty else None
        )
        properties[parameter.name] = {"type": json_type} if json_type else {}
        if parameter.default is inspect.Parameter.empty:
            required.append(parameter.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def mock_problems(mocks: object) -> list[str]:
    """What is wrong with a case's ``mocks`` list, one sentence each."""
    if not isinstance(mocks, list | tuple):
        return [f"mocks must be a list of mock.api/cli/mcp(...), not {type(mocks).__name__}"]
    problems = []
    seen: set[str] = set()
    for item in mocks:
        if not isinstance(item, Mock):
            problems.append(
                f"mocks holds a {type(item).__name__}; build each with mock.api/cli/mcp(...)"
            )
            continue
        where = f"mock {item.name!r}"
        if not isinstance(item.name, str) or not NAME.match(item.name):
            problems.append(
                f"{where}: a mock's name is 1 to 40 lowercase letters, digits, - or _, starting with a letter"
            )
        if item.name in seen:
            problems.append(f"{where} is defined twice; give each mock its own name")
        seen.add(item.name)
        if item.host is not None:
            if item.kind == "cli":
                problems.append(f"{where}: a cli mock is a command, it takes no host=")
            elif not isinstance(item.host, str) or not HOST.match(item.host):
                problems.append(
                    f"{where}: host {item.host!r} must be a lowercase host name like 'billing.internal'"
                )
            elif item.host == "localhost":
                problems.append(
                    f"{where}: host 'localhost' is the sandbox's own; pick another name"
                )
        if item.env is not None and (not isinstance(item.env, str) or not ENV_NAME.match(item.env)):
            problems.append(
                f"{where}: env names the variable that holds its URL, like 'BILLING_URL' "
                f"(got {item.env!r})"
            )
        if item.kind == "api":
            if not isinstance(item.routes, Mapping):
                problems.append(
                    f"{where}: routes must map 'METHOD /path' to answers, like "
                    f"{{'GET /orders/{{id}}': {{'total': 30}}}} (got {a_type(item.routes)})"
                )
                continue
            for route, answer in item.routes.items():
                method, _, path = str(route).partition(" ")
                if method not in METHODS or not path.startswith("/"):
                    problems.append(
                        f"{where}: route {route!r} must be 'METHOD /path' (METHOD one of {', '.join(METHODS)})"
                    )
                elif set("{}") & set(PLACEHOLDER.sub("", path)):
                    problems.append(
                        f"{where}: route {route!r}: a placeholder is a name in braces, like {{id}}"
                    )
                if not isinstance(answer, Response | Mapping | list | str) and not callable(answer):
                    problems.append(
                        f"{where}: route {route!r} answers with {a_type(answer)}; give "
                        "mock.response(...), a dict, a str or a function(request, state)"
                    )
        elif item.kind == "cli":
            if item.script is not None and not isinstance(item.script, Mapping):
                problems.append(
                    f"{where}: script must map argument patterns to answers, like "
                    f"{{'pr create *': 'https://example.test/pull/1'}} (got {a_type(item.script)})"
                )
                continue
            if (item.script is None) == (item.handler is None):
                problems.append(f"{where}: a cli mock takes script=... or handler=..., one of them")
            if item.handler is not None and not callable(item.handler):
                problems.append(f"{where}: handler must be a function(call, state)")
            for pattern, scripted in (item.script or {}).items():
                if not isinstance(pattern, str):
                    problems.append(f"{where}: script pattern {pattern!r} must be a string")
                if not isinstance(scripted, Output | str | int) and not callable(scripted):
                    problems.append(
                        f"{where}: script answer for {pattern!r} must be mock.output(...), a str or an exit code"
                    )
            if "/" in item.name:
                problems.append(f"{where}: a command name holds no '/'")
        elif item.kind == "mcp":
            wrong = [f for f in MCP_MAPPINGS if not isinstance(getattr(item, f), Mapping)]
            for name in wrong:
                problems.append(
                    f"{where}: {name} must map {MCP_MAPPINGS[name]} "
                    f"(got {a_type(getattr(item, name))})"
                )
            if wrong:
                continue
            if not item.tools:
                problems.append(f"{where}: an mcp mock needs at least one tool")
            for tool, func in item.tools.items():
                if not callable(func):
                    problems.append(f"{where}: tool {tool!r} must be a function")
            for tool in item.schema:
                if tool not in item.tools:
                    problems.append(
                        f"{where}: schema names {tool!r}, which is not one of its tools"
                    )
        else:
            problems.append(f"{where}: unknown kind {item.kind!r} (known: {', '.join(KINDS)})")
    return problems


def host_problems(suite_mocks: object, case_mocks: object, variants: Sequence[object]) -> list[str]:
    """A case's mock reached by host name under a variant whose sandbox cannot resolve it: the
    local sandbox runs the agent with the machine's own /etc/hosts."""
    given = [
        item
        for mocks in (suite_mocks, case_mocks)
        if isinstance(mocks, list | tuple)
        for item in mocks
        if isinstance(item, Mock)
    ]
    problems = []
    for item in {m.name: m for m in given}.values():  # a case's mock replaces the suite's
        if not item.host:
            continue
        for variant in variants:
            sandbox = getattr(variant, "sandbox", None)
            if sandbox == HOSTLESS_SANDBOX:
                problems.append(
                    f"mock {item.name!r} has host={item.host!r}, which the local sandbox of "
                    f"variant {getattr(variant, 'name', '?')} cannot resolve (it shares the "
                    f"machine's /etc/hosts); use sandbox='bwrap' or 'docker', or drop host= and "
                    f"read ${item.env_var}"
                )
    return problems


def merged_mocks(suite_mocks: Sequence[Mock], case_mocks: Sequence[Mock]) -> tuple[Mock, ...]:
    """The suite's mocks with the case's on top (a case's mock replaces the suite's of the same
    name)."""
    by_name = {m.name: m for m in suite_mocks}
    by_name.update({m.name: m for m in case_mocks})
    return tuple(by_name.values())


def mock_definition(
    item: Mock, describe: Callable[[Callable[..., Any]], dict[str, Any]]
) -> dict[str, Any]:
    """``item`` as stable JSON for the case's resolved definition; ``describe`` captures a
    handler (its file, name and source hash). Where a handler sits in its file is left out, so
    moving it makes no new case version; changing it, or a route, does."""

    def handler(func: Callable[..., Any]) -> dict[str, Any]:
        ref = describe(func)
        return {"handler": {k: v for k, v in ref.items() if k not in ("start", "end")}}

    def answer(value: Any) -> dict[str, Any]:
        if isinstance(value, Response | Output):
            return value.to_definition()
        if callable(value):
            return handler(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return {"exit": value}
        if isinstance(value, str):
            return {"text": value}
        return {"json": value}

    entry: dict[str, Any] = {"kind": item.kind, "name": item.name}
    if item.host:  # only when given: versions of mocks without one stay as they were
        entry["host"] = item.host
    if item.kind == "api":
        entry["env"] = item.env_var
        entry["routes"] = {route: answer(value) for route, value in sorted(item.routes.items())}
    elif item.kind == "cli":
        entry["script"] = (
            [[pattern, answer(value)] for pattern, value in item.script.items()]
            if item.script is not None
            else None
        )
        entry["handler"] = handler(item.handler)["handler"] if item.handler else None
    else:
        entry["env"] = item.env_var
        entry["tools"] = {
            tool: {
                "description": item.tool_description(tool),
                "schema": item.tool_schema(tool),
                **handler(func),
            }
            for tool, func in sorted(item.tools.items())
        }
    return entry
