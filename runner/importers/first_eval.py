"""The starter plain ``proctor init`` writes: one suite, two cases, a stand-in agent.

It runs as written with nothing configured (the agent is a shell command, the checks need only
``python3``), so a first ``proctor eval`` shows a green grid; its comments say what to change to
evaluate a real agent on a real task.
"""

from __future__ import annotations

FIRST_EVAL_FILE = "first.eval.py"

FIRST_EVAL = '''\
"""A first eval, written by `proctor init`: run it with `proctor eval`, then make it yours.

Each case is a task for the agent. Every trial starts from a fresh copy of the workspace below,
runs the agent with the case's prompt, then grades the result with the case's checks.
"""

from proctor import Verdict, case, command, files, profile, suite, variant

# The files the agent starts from (or repo("owner/name@ref"), or repo("./a/local/checkout")).
WORKSPACE = files(
    {
        "calc.py": "def add(a, b):\\n    return a - b\\n",
        "test_calc.py": "from calc import add\\n\\n\\ndef test_add():\\n    assert add(2, 3) == 5\\n",
    }
)

# A stand-in agent, so this file runs with nothing set up: a shell command that fixes the bug
# and says so in one protocol line. Put your agent here instead, for example
#     variant("claude-code", model="claude-sonnet-4-5")
#     variant("codex", model="gpt-5-codex")
# (`proctor harness list` shows them all), or your own program: profile(run="python3 agent.py").
STAND_IN = (
    "sed -i 's/a - b/a + b/' calc.py && "
    """echo '{"_tag": "Message", "role": "assistant", "text": "add() now adds."}'"""
)
stand_in = variant("command", profile=profile("stand-in", run=STAND_IN))


def adds_two_numbers(ctx) -> Verdict:
    """A validator: Python that reads the workspace (and the conversation) after the agent."""
    result = ctx.exec("python3 -c 'from calc import add; print(add(2, 3))'")
    printed = result.output.strip()
    return Verdict(printed == "5", f"add(2, 3) printed {printed!r}")


first = suite(
    "first",
    prompt="{{task}}",
    source=WORKSPACE,
    cases=[
        case(
            "first-fix-add",
            variables={"task": "add() in calc.py subtracts. Make it add."},
            validate=[adds_two_numbers],
        ),
        case(
            "first-tests-pass",
            variables={"task": "Make the test in test_calc.py pass."},
            # A shell command passes when it exits 0 in the workspace.
            validate=command("python3 -c 'import test_calc; test_calc.test_add()'"),
        ),
    ],
    variants=[stand_in],
    trials=2,
)
'''
