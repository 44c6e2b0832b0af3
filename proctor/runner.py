"""The runner kit: write a command-harness agent process in Python.

Proctor's command harness starts your process in the sandbox with the case in environment
variables and records the JSON event lines it prints on stdout. :func:`env` reads those
variables (the case's own ``variables={...}`` arrive whole, as the JSON object
``PROCTOR_CASE_VARS``, or in the file ``PROCTOR_CASE_VARS_FILE`` names when too large for the
environment: ``env().variables["topic"]``; a prompt too large for the environment is read from
``SPHYNX_PROMPT_FILE`` the same way); :func:`create_emitter` prints the event lines and refuses, with
:class:`ProtocolError`, any line the runner would record as a protocol error instead of the event
you meant. Both sides check lines with :mod:`proctor.protocol`, so they cannot disagree.

A complete agent, ``agent.py`` in the profile directory, with the profile's run set to
``python3 "$PROCTOR_PROFILE_DIR/agent.py"`` (the run starts in the workspace; the profile folder
is shipped to ``$HOME/profile``; the local sandbox puts Proctor's own Python first on PATH, other
sandboxes need ``proctor`` importable, e.g. from the profile's install)::

    import subprocess

    from proctor.runner import create_emitter, env

    case = env()
    emit = create_emitter()
    emit.started("run-1", model=case.model or None)

    # Commands a Python process runs are invisible to the shell recorder: report them.
    listing = subprocess.run(["ls"], cwd=case.workspace, capture_output=True, text=True)
    emit.command("ls", listing.returncode, listing.stdout)
    names = listing.stdout.split()
    emit.tool_call("count_files", {"directory": case.workspace}, output=len(names))

    with open(f"{case.workspace}/ANSWER.md", "w") as answer:
        answer.write(f"{len(names)} files\\n")
    emit.file_change(f"{case.workspace}/ANSWER.md")

    # The last assistant message is the answer validators read.
    emit.message(f"The workspace holds {len(names)} files. You asked: {case.prompt}")
    emit.usage(input_tokens=120, output_tokens=14)
    emit.finished("done")

Printing anything else on stdout is fine: lines without a known ``_tag`` are not events.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from proctor.protocol import parse_line


class MissingVariable(RuntimeError):
    """An environment variable the command harness always sets is missing."""


class MalformedVariable(RuntimeError):
    """A variable the command harness sets holds what it never sets (set by hand, wrongly)."""


class ProtocolError(ValueError):
    """An event the runner would not accept; the message names the tag and the field."""


@dataclass(frozen=True)
class RunnerEnv:
    """The case as the command harness passes it to the process."""

    prompt: str
    model: str  # the variant's model verbatim; empty for a variant without one
    workspace: str
    home: str
    system_prompt_file: str | None  # set only when the profile has a system prompt
    trace_log: str
    session_id: str | None  # the session to resume, on follow-up turns
    mode: str | None  # "plan" or "act" when the conversation uses plan mode
    # The case's variables ({"topic": "bees"}), from PROCTOR_CASE_VARS(_FILE); empty when unset.
    variables: Mapping[str, Any] = field(default_factory=dict)


def _required(environ: Mapping[str, str], name: str) -> str:
    # Present but empty is a real value (SPHYNX_MODEL is empty for a variant without a model).
    if name not in environ:
        raise MissingVariable(
            f"{name} is not set: run this process through Proctor's command harness, "
            "or set it by hand."
        )
    return environ[name]


def _optional(environ: Mapping[str, str], name: str) -> str | None:
    return environ.get(name) or None


def env(environ: Mapping[str, str] | None = None) -> RunnerEnv:
    """The harness's variables from ``environ`` (default ``os.environ``).

    Raises :class:`MissingVariable` naming the first always-set variable that is missing, so a
    script started by hand fails with a sentence instead of a ``KeyError``, and
    :class:`MalformedVariable` when the case's variables are set but are no JSON object.
    """
    source = os.environ if environ is None else environ
    return RunnerEnv(
        prompt=_prompt(source),
        model=_required(source, "SPHYNX_MODEL"),
        workspace=_required(source, "SPHYNX_WORKSPACE"),
        home=_required(source, "SPHYNX_HOME"),
        system_prompt_file=_optional(source, "SPHYNX_SYSTEM_PROMPT_FILE"),
        trace_log=_required(source, "SPHYNX_TRACE_LOG"),
        session_id=_optional(source, "PROCTOR_SESSION_ID"),
        mode=_optional(source, "PROCTOR_MODE"),
        variables=_case_variables(source),
    )


def _prompt(environ: Mapping[str, str]) -> str:
    # A prompt too large for one environment string comes in a file instead.
    if path := environ.get("SPHYNX_PROMPT_FILE"):
        return _file_text(f"SPHYNX_PROMPT_FILE ({path})", path)
    return _required(environ, "SPHYNX_PROMPT")


def _file_text(name: str, path: str) -> str:
    """The text of the file a ``*_FILE`` variable names; ``name`` says which in the error."""
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError as error:
        raise MalformedVariable(f"{name} cannot be read: {error.strerror}") from None


def _case_variables(environ: Mapping[str, str]) -> dict[str, Any]:
    # Optional: a process started by hand, or by a Proctor from before it was set, has none.
    name, text = "PROCTOR_CASE_VARS", environ.get("PROCTOR_CASE_VARS") or "{}"
    if path := environ.get("PROCTOR_CASE_VARS_FILE"):  # variables too large for the environment
        name = f"PROCTOR_CASE_VARS_FILE ({path})"
        text = _file_text(name, path)
    try:
        variables = json.loads(text)
    except ValueError:
        variables = None
    if not isinstance(variables, dict):
        raise MalformedVariable(
            f"{name} is not a JSON object of the case's variables: {text[:80]!r}"
        )
    return variables


def _print_line(line: str) -> None:
    print(line, flush=True)


def _epoch_ms() -> int:
    return int(time.time() * 1000)


def _json_text(value: Any) -> Any:
    """A tool input, output or error that is not a string, as the JSON text the runner stores."""
    if isinstance(value, str):
        return value
    # ensure_ascii=False matches how the runner itself turns a non-string value into text.
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _camel_case(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class Emitter:
    """Prints one protocol line per call; build it with :func:`create_emitter`.

    Each method checks its line before printing and raises :class:`ProtocolError` when the
    runner would refuse it; nothing is printed then. Every line carries ``at`` from ``now``.
    Safe to share between threads: lines never interleave.
    """

    def __init__(self, write: Callable[[str], Any], now: Callable[[], float]) -> None:
        self._write = write
        self._now = now
        self._lock = threading.Lock()
        self._finished = False

    def started(self, session_id: str, model: str | None = None) -> None:
        fields: dict[str, Any] = {"sessionId": session_id}
        if model is not None:
            fields["model"] = model
        self._emit("Started", fields)

    def message(
        self, text: str, role: str = "assistant", usage: Mapping[str, int] | None = None
    ) -> None:
        """A conversation turn; ``usage`` takes the keys of :meth:`usage` (``input_tokens``...)."""
        fields: dict[str, Any] = {"role": role, "text": text}
        if usage is not None:
            fields["usage"] = (
                {_camel_case(key): count for key, count in usage.items()}
                if isinstance(usage, Mapping)
                else usage  # the check below refuses it with the runner's words
            )
        self._emit("Message", fields)

    def tool_call(
        self,
        name: str,
        input: Any,
        output: Any = None,
        error: Any = None,
        status: str | None = None,
        call_id: str | None = None,
    ) -> None:
        """A tool call; ``input``, ``output`` and ``error`` that are not strings become JSON."""
        try:
            fields: dict[str, Any] = {"callId": call_id, "name": name, "input": _json_text(input)}
            if output is not None:
                fields["output"] = _json_text(output)
            if error is not None:
                fields["error"] = _json_text(error)
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"ToolCall: a value cannot be written as JSON ({exc})") from exc
        fields["status"] = status  # the protocol wants callId and status present, even as null
        self._emit("ToolCall", fields)

    def usage(
        self,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        cost_usd: float | None = None,
    ) -> None:
        """Tokens for one turn; counts must be whole numbers, zero or more. ``cost_usd``: what
        the turn cost, when the agent knows (Proctor otherwise prices the tokens itself)."""
        fields: dict[str, Any] = {
            "inputTokens": input_tokens,
            "outputTokens": output_tokens,
            "cacheReadTokens": cache_read_tokens,
            "cacheWriteTokens": cache_write_tokens,
        }
        if cost_usd is not None:
            fields["costUsd"] = cost_usd
        self._emit("Usage", fields)

    def command(self, command: str, exit_code: int | None, output: str = "") -> None:
        self._emit("Command", {"command": command, "exitCode": exit_code, "output": output})

    def file_change(self, paths: str | list[str]) -> None:
        """Absolute paths written: one path, or a list (a tuple works too)."""
        if isinstance(paths, str):
            paths = [paths]
        elif isinstance(paths, tuple):
            paths = list(paths)
        self._emit("FileChange", {"paths": paths})

    def finished(self, reason: str) -> None:
        """Ends the journal; a second call prints nothing."""
        self._emit("Finished", {"reason": reason})

    def _emit(self, tag: str, fields: dict[str, Any]) -> None:
        with self._lock:
            if tag == "Finished" and self._finished:
                return
            line = self._checked_line({"_tag": tag, **fields, "at": self._now()})
            self._write(line)
            if tag == "Finished":
                self._finished = True

    @staticmethod
    def _checked_line(obj: dict[str, Any]) -> str:
        tag = obj["_tag"]
        try:
            # ASCII escapes keep the line printable under any stdout encoding; parsing gives
            # back the same text.
            line = json.dumps(obj, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"{tag}: a value cannot be written as JSON ({exc})") from exc
        event = parse_line(line)
        assert event is not None  # a dict with a known tag is always an event or an error
        if event.kind == "ProtocolError":
            raise ProtocolError(event.data["error"])
        return line


def create_emitter(
    write: Callable[[str], Any] | None = None, now: Callable[[], float] | None = None
) -> Emitter:
    """An emitter printing to stdout, or handing each line (no newline) to ``write``.

    ``now`` gives the epoch milliseconds stamped as ``at``; the default is the clock.
    """
    return Emitter(write or _print_line, now or _epoch_ms)
