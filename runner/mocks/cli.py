"""The ``mock.cli`` runtime: the shim on the agent's PATH posts each run here; the answer comes
from the script (first matching pattern) or the handler, and the run is logged."""

from __future__ import annotations

import asyncio
import fnmatch
import json
import shlex
import time
from dataclasses import dataclass
from typing import Any

from proctor.mock import Mock, Output
from runner.core.limits import UserCodeError
from runner.mocks.api import read_body, send_answer
from runner.mocks.call_log import CallLog
from runner.mocks.handlers import call_handler


@dataclass(frozen=True)
class CliCall:
    """What a cli mock's handler receives: ``call.args == ["pr", "create", "--title", "x"]``."""

    argv: list[str]
    stdin: str
    cwd: str
    env_names: list[str]

    @property
    def args(self) -> list[str]:
        return self.argv[1:]

    @property
    def line(self) -> str:
        """The arguments joined as a shell would show them."""
        return shlex.join(self.args)


def normalize_output(value: Any) -> Output:
    if isinstance(value, Output):
        return value
    if value is None:
        return Output()
    if isinstance(value, bool):
        return Output(exit=0 if value else 1)
    if isinstance(value, int):
        return Output(exit=value)
    if isinstance(value, dict):
        return Output(
            stdout=str(value.get("stdout", "")),
            stderr=str(value.get("stderr", "")),
            exit=int(value.get("exit", 0)),
        )
    text = str(value)
    return Output(stdout=text if text.endswith("\n") or not text else text + "\n")


def script_answer(mock: Mock, call: CliCall) -> tuple[Any, bool]:
    """(the answer of the first pattern matching the arguments, whether one matched)."""
    joined = " ".join(call.args)
    for pattern, answer in (mock.script or {}).items():
        if fnmatch.fnmatchcase(joined, pattern) or (pattern in ("", "*") and not joined):
            return answer, True
    return None, False


class CliMock:
    def __init__(self, mock: Mock, limit_s: float | None = None) -> None:
        self.mock = mock
        self.state: dict[str, Any] = {}
        self.log = CallLog(mock.name, "cli")
        self.limit_s = limit_s

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        started = time.time()
        request = json.loads((await read_body(receive)) or b"{}")
        call = CliCall(
            argv=[str(a) for a in request.get("argv") or [self.mock.name]],
            stdin=str(request.get("stdin") or ""),
            cwd=str(request.get("cwd") or ""),
            env_names=sorted(str(n) for n in request.get("env_names") or []),
        )
        error = ""
        what = f"mock {self.mock.name} ({call.line or 'no arguments'})"
        try:
            if self.mock.handler is not None:
                value = await asyncio.to_thread(
                    call_handler,
                    self.mock.handler,
                    (call,),
                    self.state,
                    what=what,
                    limit_s=self.limit_s,
                )
                output = normalize_output(value)
            else:
                value, matched = script_answer(self.mock, call)
                if not matched:
                    error = "no scripted answer"
                    output = Output(
                        stderr=f"{self.mock.name} (mock): no scripted answer for: {call.line}\n",
                        exit=1,
                    )
                elif callable(value):
                    value = await asyncio.to_thread(
                        call_handler, value, (call,), self.state, what=what, limit_s=self.limit_s
                    )
                    output = normalize_output(value)
                else:
                    output = normalize_output(value)
        except UserCodeError as exc:
            error = str(exc)
            output = Output(stderr=f"{self.mock.name} (mock): {exc}\n", exit=1)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            output = Output(stderr=f"{self.mock.name} (mock): {error}\n", exit=1)
        answer = {"stdout": output.stdout, "stderr": output.stderr, "exit": output.exit}
        # Logged before the answer leaves: once the agent has it, a check sees the call.
        self.log.add(
            started=started,
            method=self.mock.name,
            path=shlex.join([self.mock.name, *call.args]),
            status=output.exit,
            argv=call.argv,
            stdin=call.stdin,
            cwd=call.cwd,
            env_names=call.env_names,
            response=output.stdout,
            stderr=output.stderr,
            error=error,
        )
        await send_answer(send, 200, json.dumps(answer).encode(), "application/json", {})
