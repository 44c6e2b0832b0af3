"""proctor.promptfoo_provider as the command harness runs it: promptfoo's exec:, Python and echo
providers called with promptfoo's arguments, their answers printed as protocol events."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PROVIDER_PY = """
def call_api(prompt, options, context):
    return {"output": {"city": options["config"]["city"], "asked": prompt},
            "tokenUsage": {"prompt": 12, "completion": 3, "total": 15}, "cost": 0.002}

def failing(prompt, options, context):
    return {"error": "rate limited upstream"}
"""
ARGUMENTS_PY = """
import json, sys
print(json.dumps(sys.argv[1:]))
"""


def run(
    folder: Path, *argv: str, system_prompt: str | None = None, case_vars: str | None = None
) -> tuple[int, list[dict[str, Any]]]:
    env = {
        "SPHYNX_PROMPT": "Capital of France?",
        "SPHYNX_MODEL": "",
        "SPHYNX_WORKSPACE": str(folder),
        "SPHYNX_HOME": str(folder),
        "SPHYNX_TRACE_LOG": str(folder / "trace.log"),
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }
    if case_vars is not None:
        env["PROCTOR_CASE_VARS"] = case_vars
    if system_prompt is not None:
        (folder / "system.md").write_text(system_prompt)
        env["SPHYNX_SYSTEM_PROMPT_FILE"] = str(folder / "system.md")
    done = subprocess.run(
        [sys.executable, "-m", "proctor.promptfoo_provider", *argv],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]


def of(events: list[dict[str, Any]], tag: str) -> list[dict[str, Any]]:
    return [event for event in events if event["_tag"] == tag]


def test_exec_passes_the_prompt_options_and_context_as_the_last_three_arguments(
    tmp_path: Path,
) -> None:
    (tmp_path / "arguments.py").write_text(ARGUMENTS_PY)

    code, events = run(
        tmp_path,
        "exec",
        '{"id": "exec:x", "config": {"k": 1}}',
        "--",
        sys.executable,
        "arguments.py",
        "--fast",
    )

    (message,) = of(events, "Message")
    flag, prompt, options, context = json.loads(message["text"])
    assert code == 0 and (flag, prompt) == ("--fast", "Capital of France?")
    assert json.loads(options) == {"id": "exec:x", "config": {"k": 1}}
    assert json.loads(context)["prompt"]["raw"] == "Capital of France?"
    assert of(events, "Finished") == [
        {"_tag": "Finished", "reason": "done", "at": events[-1]["at"]}
    ]


CASE_VARS = json.dumps(
    {
        "topic": "bees",
        "count": 3,
        "facts": '{"legs": 6}',
        "quoted": '{"legs": 6}',
        "promptfoo_prompt_1": "held",
        "promptfoo_system_1": "",
        "promptfoo_data_vars": '["facts"]',
    }
)
# promptfoo's vars: the data it held as data, text as text, the importer's own left out.
TEST_VARS = {"topic": "bees", "count": 3, "facts": {"legs": 6}, "quoted": '{"legs": 6}'}
VARS_PY = """
def call_api(prompt, options, context):
    return {"output": context["vars"]}
"""


def test_the_context_carries_the_tests_vars_as_promptfoo_had_them(tmp_path: Path) -> None:
    (tmp_path / "arguments.py").write_text(ARGUMENTS_PY)
    (tmp_path / "provider.py").write_text(VARS_PY)

    _, by_exec = run(
        tmp_path, "exec", "{}", "--", sys.executable, "arguments.py", case_vars=CASE_VARS
    )
    _, by_python = run(tmp_path, "python", "{}", "provider.py", case_vars=CASE_VARS)

    (exec_message,) = of(by_exec, "Message")
    (python_message,) = of(by_python, "Message")
    assert json.loads(json.loads(exec_message["text"])[-1])["vars"] == TEST_VARS
    assert json.loads(python_message["text"]) == TEST_VARS


def test_exec_that_fails_ends_the_turn_with_its_status_and_stderr(tmp_path: Path) -> None:
    code, events = run(
        tmp_path, "exec", "{}", "--", sys.executable, "-c", "import sys; sys.exit('no model here')"
    )

    assert code == 1 and of(events, "Message") == []
    (finished,) = of(events, "Finished")
    assert finished["reason"].startswith("error: ") and "no model here" in finished["reason"]


def test_python_call_api_answers_with_its_output_usage_and_cost(tmp_path: Path) -> None:
    (tmp_path / "provider.py").write_text(PROVIDER_PY)

    code, events = run(tmp_path, "python", '{"config": {"city": "Paris"}}', "provider.py")

    (message,) = of(events, "Message")
    (usage,) = of(events, "Usage")
    assert code == 0
    assert json.loads(message["text"]) == {"city": "Paris", "asked": "Capital of France?"}
    assert (usage["inputTokens"], usage["outputTokens"], usage["costUsd"]) == (12, 3, 0.002)


def test_a_python_providers_error_ends_the_turn_with_it(tmp_path: Path) -> None:
    (tmp_path / "provider.py").write_text(PROVIDER_PY)

    code, events = run(tmp_path, "python", "{}", "provider.py", "failing")

    (finished,) = of(events, "Finished")
    assert code == 1 and "rate limited upstream" in finished["reason"]


@pytest.mark.parametrize("system_prompt", [None, "You are terse."])
def test_echo_answers_the_prompt_as_promptfoo_would_send_it(tmp_path: Path, system_prompt) -> None:
    code, events = run(tmp_path, "echo", system_prompt=system_prompt)

    (message,) = of(events, "Message")
    if system_prompt is None:
        assert message["text"] == "Capital of France?"
    else:
        assert json.loads(message["text"]) == [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Capital of France?"},
        ]
