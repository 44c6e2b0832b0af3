"""Running an eval's JavaScript and Python code as promptfoo runs it: assertions, transforms and
derived metrics.

JavaScript runs in Node (``node`` on PATH, or PROCTOR_NODE), one process per call, in a fresh
temporary folder; Python runs in a forked child (runner.core.limits). Both are bounded by the
check limit and get the same arguments: ``output`` and ``context``. Inline Python is promptfoo's
``main(output, context)``: one line is the returned expression, several lines its body. A
Python file's default function is ``get_assert`` (``get_transform`` for a transform).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from proctor.scripts import Script
from runner.core.limits import UserCodeError, UserCodeRaised, run_forked
from runner.core.results import clip

NODE_SCRIPT = Path(__file__).with_name("node_script.js")
DEFAULT_PYTHON_FUNCTION = {"assert": "get_assert", "transform": "get_transform"}


class ScriptFailed(Exception):
    """The code raised, hung, or returned what cannot be read; the message says which."""

    def __init__(self, message: str, printed: str = "") -> None:
        super().__init__(message)
        self.printed = printed


def run_script(
    code: Script, args: list[Any], *, limit_s: float, purpose: str = "assert"
) -> tuple[Any, str]:
    """(value, printed) of ``code`` called with ``args``; raises ScriptFailed."""
    if code.language == "javascript":
        return _run_node(code, args, limit_s=limit_s)
    return _run_python(code, args, limit_s=limit_s, purpose=purpose)


def node_command() -> str:
    node = os.environ.get("PROCTOR_NODE") or shutil.which("node")
    if not node:
        raise ScriptFailed(
            "JavaScript assertions run with Node, and no `node` is on PATH (install Node.js, "
            "or set PROCTOR_NODE to its path)"
        )
    return node


def _run_node(code: Script, args: list[Any], *, limit_s: float) -> tuple[Any, str]:
    node = node_command()
    with tempfile.TemporaryDirectory(prefix="proctor-js-") as workdir:
        result_path = Path(workdir) / "result.json"
        request = {
            "code": code.text,
            "inline": code.inline,
            "function": code.function,
            "filename": Path(code.path).name if code.path else "inline.js",
            # Where the file sits, so it loads as itself: require('./x') and __dirname.
            "location": _file_in_place(code),
            "args": args,
            "workdir": workdir,
            "resultPath": str(result_path),
        }
        try:
            finished = subprocess.run(
                [node, str(NODE_SCRIPT)],
                input=json.dumps(request, default=str),
                capture_output=True,
                text=True,
                timeout=limit_s,
                cwd=workdir,
            )
        except subprocess.TimeoutExpired as exc:
            printed = _text(exc.stdout) + _text(exc.stderr)
            raise ScriptFailed(
                f"the JavaScript did not finish within {limit_s:g} s", printed
            ) from None
        printed = finished.stdout + finished.stderr
        try:
            result = json.loads(result_path.read_text())
        except (OSError, ValueError):
            raise ScriptFailed(
                f"node ended (exit {finished.returncode}) without an answer", printed
            ) from None
    if not result["ok"]:
        raise ScriptFailed(f"the JavaScript threw: {_first_lines(result['error'])}", printed)
    return (result["value"] if result["defined"] else None), printed


def _file_in_place(code: Script) -> str | None:
    """The file a script came from, where this trial runs, when it is still there; the code
    run is always the text captured when the eval loaded (the trial page shows it)."""
    if code.location is None or not os.path.isfile(code.location):
        return None
    return code.location


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value or ""


def _first_lines(text: str, lines: int = 3) -> str:
    return " | ".join(text.strip().splitlines()[:lines])


def _run_python(code: Script, args: list[Any], *, limit_s: float, purpose: str) -> tuple[Any, str]:
    def call(_note: Any) -> Any:
        value = _python_function(code, purpose)(*args)
        return _plain(value)

    try:
        return run_forked(call, limit_s=limit_s, what="the Python")
    except UserCodeRaised as exc:
        raise ScriptFailed(f"the Python raised {exc}", exc.printed) from None
    except UserCodeError as exc:  # hung, or ended its process
        raise ScriptFailed(str(exc), exc.printed) from None


def _python_function(code: Script, purpose: str) -> Any:
    if code.inline:
        # As promptfoo: any line break (a YAML block's last one too) makes it a body.
        text = code.text
        body = (
            textwrap.indent(textwrap.dedent(text), "    ")
            if "\n" in text
            else f"    return {text.strip()}"
        )
        namespace: dict[str, Any] = {"json": json}
        exec(compile(f"def main(output, context):\n{body}\n", "<inline python>", "exec"), namespace)
        return namespace["main"]
    filename = _file_in_place(code) or code.path or "<python file>"
    module = types.ModuleType(Path(code.path or "check.py").stem)
    module.__file__ = filename
    if filename != code.path:
        # As when Python runs the file: its folder's modules import. Only the forked child that
        # grades sees this.
        sys.path.insert(0, str(Path(filename).parent))
    exec(compile(code.text, filename, "exec"), module.__dict__)
    name = code.function or DEFAULT_PYTHON_FUNCTION.get(purpose, "get_assert")
    function = module.__dict__.get(name)
    if not callable(function):
        raise AttributeError(f"{code.path} has no function {name}")
    return function


def _plain(value: Any) -> Any:
    """The value as JSON would carry it (a dataclass or object as its fields), so it crosses
    from the child and reads the same as Node's."""
    try:
        return json.loads(json.dumps(value, default=_fields))
    except (TypeError, ValueError):
        return str(value)


def _fields(value: Any) -> Any:
    if hasattr(value, "__dict__"):
        return {k: v for k, v in vars(value).items() if not k.startswith("_")}
    raise TypeError(type(value).__name__)


# --- reading an assertion's answer -------------------------------------------------------------


def graded(
    value: Any, *, language: str, threshold: float | None, shown: str, inverse: bool = False
) -> tuple[bool, float, str]:
    """(passed, score, reason) from what an assertion's code returned, as promptfoo reads it:
    a bool; a number (passes above 0, or at ``threshold``); a ``{pass, score, reason}``
    object; from Python also "true"/"false", a JSON object or a number as text.

    ``inverse`` (promptfoo's ``not-javascript``, ``not-python``) inverts the pass once the
    threshold is applied; the score stays the number or the object's score, and only a
    bool's follows the inverted pass."""
    who = "JavaScript" if language == "javascript" else "Python"
    if language == "python" and isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "false"):
            value = lowered == "true"
        elif value.lstrip().startswith("{"):
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise ScriptFailed(f"{who} returned text that is not JSON ({exc})") from None
        else:
            with contextlib.suppress(ValueError):
                value = float(value)
    if isinstance(value, bool):
        passed = value != inverse
        return (
            passed,
            float(passed),
            "Assertion passed" if passed else f"{who} returned {_js(value)}",
        )
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ScriptFailed(f"{who} returned {value}; a score is a finite number")
        passed = (value >= threshold if threshold is not None else value > 0) != inverse
        bound = f" (threshold {threshold:g})" if threshold is not None else ""
        negated = " (negated)" if inverse else ""
        return passed, float(value), f"{who} returned {value:g}{bound}{negated}"
    if isinstance(value, Mapping) and isinstance(value.get("pass", value.get("pass_")), bool):
        passed = bool(value.get("pass", value.get("pass_")))
        raw_score = value.get("score")
        score = float(raw_score) if isinstance(raw_score, int | float) else float(passed)
        reason = str(value.get("reason") or ("Assertion passed" if passed else f"{who} failed"))
        if language == "python" and threshold is not None and score < threshold:
            passed = False
            reason = f"{who} score {score:g} is less than threshold {threshold:g}: {reason}"
        if inverse:
            passed = not passed
            reason = "Assertion passed" if passed else str(value.get("reason") or f"{who} passed")
        return passed, score, reason
    raise ScriptFailed(
        f"{who} returned {clip(json.dumps(value, default=str), 120)}; an assertion returns a "
        f"bool, a number or {{pass, score, reason}} ({shown[:60]})"
    )


def _js(value: bool) -> str:
    return "true" if value else "false"
