"""promptfoo's script providers run as command-harness agents.

``proctor import promptfoo`` turns ``exec:<command>``, ``file://x.py`` (or ``python:x.py``) and
``echo`` providers into variants of the command harness whose run line is this module, run
from the profile folder that holds the config's files::

    python3 -m proctor.promptfoo_provider exec '<options JSON>' -- python chain.py --fast
    python3 -m proctor.promptfoo_provider python '<options JSON>' provider.py [function]
    python3 -m proctor.promptfoo_provider echo

Each is called as promptfoo calls it. ``exec`` runs the command (no shell) in the profile
folder with three more arguments, the prompt, the provider's options as JSON and the call's
context as JSON; what it prints on stdout, trimmed and without terminal colours, is the answer,
and a failed exit or a stderr with no stdout is an error. ``python`` imports the file and calls
``call_api(prompt, options, context)`` (or the named function; a coroutine is awaited), which
returns ``{output, error, tokenUsage, cost}``: a non-text output is answered as JSON, an error
ends the turn with it, token counts and cost are the turn's usage. ``echo`` answers the prompt.

A suite's system prompt reaches the provider as promptfoo sends a chat prompt to a custom
provider: the prompt becomes the JSON text of ``[{role: system}, {role: user}]`` messages.
The context is promptfoo's ``{vars, prompt}``: ``vars`` are the test's variables, which the
command harness hands to the process as ``PROCTOR_CASE_VARS`` (``proctor.runner``), as
promptfoo had them (``proctor.promptfoo_vars``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from proctor.promptfoo_vars import promptfoo_vars
from proctor.runner import create_emitter, env

# The function promptfoo calls in a Python provider unless the path names another.
DEFAULT_FUNCTION = "call_api"
_ANSI_ESCAPE = re.compile(r"\x1b(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])")
USAGE = "usage: python3 -m proctor.promptfoo_provider exec|python|echo ..."


class ProviderFailed(Exception):
    """The provider gave no answer; the message says why, in one line."""


def main(argv: list[str]) -> int:
    case = env()
    emit = create_emitter()
    emit.started(f"promptfoo-{uuid.uuid4().hex[:12]}", model=case.model or None)
    prompt = _prompt(case.prompt, case.system_prompt_file)
    context = {"vars": promptfoo_vars(case.variables), "prompt": {"raw": prompt, "label": prompt}}
    try:
        answer, usage = _answer(argv, prompt, context)
    except ProviderFailed as failure:
        print(str(failure), file=sys.stderr)
        emit.finished(f"error: {failure}")
        return 1
    emit.message(answer)
    if usage:
        emit.usage(**usage)
    emit.finished("done")
    return 0


def _prompt(prompt: str, system_prompt_file: str | None) -> str:
    if not system_prompt_file or not Path(system_prompt_file).is_file():
        return prompt
    system = Path(system_prompt_file).read_text(encoding="utf-8")
    if not system.strip():
        return prompt
    return json.dumps(
        [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
        ensure_ascii=False,
    )


def _answer(argv: list[str], prompt: str, context: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    kind, rest = (argv[0], argv[1:]) if argv else ("", [])
    if kind == "echo":
        return prompt, {}
    if kind == "exec" and len(rest) >= 3 and rest[1] == "--":
        return _exec(rest[2:], json.loads(rest[0]), prompt, context), {}
    if kind == "python" and len(rest) in (2, 3):
        function = rest[2] if len(rest) == 3 else DEFAULT_FUNCTION
        return _python(rest[1], function, json.loads(rest[0]), prompt, context)
    raise ProviderFailed(USAGE)


def _exec(command: list[str], options: dict[str, Any], prompt: str, context: dict[str, Any]) -> str:
    arguments = [*command, prompt, json.dumps(options), json.dumps(context, ensure_ascii=False)]
    try:
        done = subprocess.run(
            arguments, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False
        )
    except OSError as error:
        raise ProviderFailed(f"cannot run {command[0]}: {error.strerror or error}") from None
    stdout = _ANSI_ESCAPE.sub("", done.stdout).strip()
    stderr = _ANSI_ESCAPE.sub("", done.stderr).strip()
    if done.returncode != 0:
        raise ProviderFailed(
            f"{' '.join(command)} exited with status {done.returncode}: {stderr[-300:] or 'no stderr'}"
        )
    if stderr and not stdout:
        raise ProviderFailed(stderr[-300:])
    return stdout


def _python(
    file: str, function: str, options: dict[str, Any], prompt: str, context: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    path = Path(file).resolve()
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise ProviderFailed(f"{file} is not a Python file here ({Path.cwd()})")
    sys.path.insert(0, str(path.parent))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    call = getattr(module, function, None)
    if not callable(call):
        raise ProviderFailed(f"{file} has no function {function}(prompt, options, context)")
    result = call(prompt, options, context)
    if inspect.iscoroutine(result):
        result = asyncio.run(result)
    if not isinstance(result, dict):
        raise ProviderFailed(
            f"{function} returned {type(result).__name__}, not a dict with an output"
        )
    if result.get("error"):
        raise ProviderFailed(f"{function} answered with an error: {result['error']}")
    output = result.get("output")
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    return text, _usage(result)


def _usage(result: dict[str, Any]) -> dict[str, Any]:
    """promptfoo's tokenUsage ({prompt, completion, total}) and cost as the turn's usage."""
    tokens = result.get("tokenUsage")
    tokens = tokens if isinstance(tokens, dict) else {}
    usage: dict[str, Any] = {}
    for theirs, ours in (("prompt", "input_tokens"), ("completion", "output_tokens")):
        if isinstance(tokens.get(theirs), int) and tokens[theirs] >= 0:
            usage[ours] = tokens[theirs]
    cost = result.get("cost")
    if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
        usage["cost_usd"] = float(cost)
    if usage:
        usage.setdefault("input_tokens", 0)
        usage.setdefault("output_tokens", 0)
    return usage


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
