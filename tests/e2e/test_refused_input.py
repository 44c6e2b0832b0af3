"""Bad input is refused, never accepted silently (issue 11, part 7): variant options nothing
reads, limits a sandbox cannot apply, eval files that end the interpreter at import, prompt
variables that are not text, and validators reading values no case version could record. Each
through the real `proctor eval`: exit 2, one line naming the file, the suite or case and the
rule, and nothing written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from e2e.running import Backend, agent_profile, write_eval

PROFILE = agent_profile("echo_agent.sh", name="echo")


def eval_file(*, variant: str = "", variables: str = "{}", prompt: str = "Do it", head: str = ""):
    variant = variant or f'variant("command", profile={PROFILE})'
    return f"""
    from proctor import case, profile, suite, variant
    {head}

    def ok(ctx):
        return True


    s = suite("refused", prompt={prompt!r},
              cases=[case("the-case", variables={variables}, validate=ok)],
              variants=[{variant}])
    """


def refused(name: str, expected: list[str], text: str):
    return pytest.param(text, expected, id=name)


def command_variant(**options: str) -> str:
    given = "".join(f", {key}={value}" for key, value in options.items())
    return f'variant("command", profile={PROFILE}{given})'


REFUSED = [
    # 1. an option no harness or sandbox reads, with the close match
    refused(
        "docker-option-typo",
        [
            "refused.eval.py",
            "suite refused",
            "memroy",
            "docker sandbox",
            "command harness",
            "memory",
        ],
        eval_file(variant=command_variant(sandbox='"docker"', memroy='"64m"')),
    ),
    refused(
        "local-option-typo",
        ["refused.eval.py", "suite refused", "prises", "local sandbox", "prices"],
        eval_file(variant=command_variant(prises="{}")),
    ),
    refused(
        "option-of-another-sandbox",
        ["refused.eval.py", "suite refused", "image", "local sandbox", "docker sandbox"],
        eval_file(variant=command_variant(image='"python:3.12"')),
    ),
    refused(
        "option-of-another-harness",
        ["refused.eval.py", "suite refused", "args", "command harness", "claude-code harness"],
        eval_file(variant=command_variant(args='["--fast"]')),
    ),
    # 2. limits the sandbox cannot apply
    *[
        refused(
            f"{sandbox}-{limit}",
            ["refused.eval.py", "suite refused", f"{sandbox} sandbox", f"{limit}=", "docker"],
            eval_file(variant=command_variant(sandbox=f'"{sandbox}"', **{limit: value})),
        )
        for sandbox in ("bwrap", "local")
        for limit, value in (("memory", '"64m"'), ("cpus", "1"), ("pids", "64"))
    ],
    # 3. an eval file that ends the interpreter at import
    refused(
        "os-exit-0",
        ["refused.eval.py", "line 2", "exits the interpreter", "os._exit(0)"],
        "import os\nos._exit(0)\n",
    ),
    refused(
        "os-exit-from-import",
        ["refused.eval.py", "line 2", "exits the interpreter", "os._exit(0)"],
        "from os import _exit\n_exit(0)\n",
    ),
    refused(
        "sys-exit-3",
        ["refused.eval.py", "line 2", "exits the interpreter", "SystemExit(3)"],
        "import sys\nsys.exit(3)\n",
    ),
    refused(
        "raise-system-exit",
        ["refused.eval.py", "line 1", "exits the interpreter", "SystemExit"],
        "raise SystemExit\n",
    ),
    # 4. prompt variables that are not text, a number or a boolean
    *[
        refused(
            f"variable-{kind}",
            ["refused.eval.py", "suite refused", "case the-case", "variable task", kind, "str()"],
            eval_file(prompt="{{task}}", variables=f"{{'task': {value}}}"),
        )
        for kind, value in (("dict", "{'a': 1}"), ("list", "['a']"), ("NoneType", "None"))
    ],
    # 5. a validator reading a value with no stable description
    refused(
        "validator-reads-an-object",
        ["refused.eval.py", "suite refused", "case the-case", "CLIENT", "memory address"],
        eval_file(
            head="class Client:\n        pass\n    CLIENT = Client()\n",
        ).replace("return True", "return CLIENT is not None"),
    ),
]


@pytest.mark.parametrize(("text", "expected"), REFUSED)
def test_it_refuses_in_one_line_and_writes_nothing(
    sqlite_backend: Backend, tmp_path: Path, text: str, expected: list[str]
):
    project = tmp_path / "project"
    write_eval(project, "refused.eval.py", text)

    result = sqlite_backend.eval(project)

    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"one line, not: {result.stderr}"
    for word in expected:
        assert word in lines[0], f"{word!r} is not in {lines[0]!r}"
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert not sqlite_backend.sqlite_path.exists()


def test_each_refused_option_is_its_own_line(sqlite_backend: Backend, tmp_path: Path):
    project = tmp_path / "project"
    variant = command_variant(sandbox='"bwrap"', memory='"1g"', pids="10", expose="[]")
    write_eval(project, "refused.eval.py", eval_file(variant=variant))

    result = sqlite_backend.eval(project)

    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert [re.search(r"apply (\w+)=", line).group(1) for line in lines] == ["memory", "pids"]


def test_numbers_and_booleans_are_written_with_str(sqlite_backend: Backend, tmp_path: Path):
    project = tmp_path / "project"
    write_eval(
        project,
        "refused.eval.py",
        eval_file(
            prompt="Count {{n}}, ratio {{r}}, strict {{s}}",
            variables="{'n': 3, 'r': 0.5, 's': True}",
        ),
    )

    sqlite_backend.eval_json(project)

    (definition,) = sqlite_backend.rows("SELECT definition FROM evals_app_caseversion")
    assert sqlite_backend.json_value(definition[0])["prompt"] == "Count 3, ratio 0.5, strict True"


CLOSURE_SUITE = """
from proctor import case, profile, suite, variant

LIMIT = {limit}


def longer_than(threshold):
    def long_answer(ctx):
        return len(ctx.answer()) > threshold and len(ctx.answer()) < LIMIT

    return long_answer


s = suite(
    "closures",
    prompt="Fix the total",
    cases=[case("closure-case", validate=longer_than({threshold}))],
    variants=[variant("command", profile={profile})],
)
"""


def test_a_changed_captured_value_makes_a_new_version(sqlite_backend: Backend, tmp_path: Path):
    project = tmp_path / "project"

    def run(threshold: int, limit: int = 1000) -> tuple[int, str]:
        text = CLOSURE_SUITE.format(threshold=threshold, limit=limit, profile=PROFILE)
        write_eval(project, "closures.eval.py", text)
        (run,) = sqlite_backend.eval_json(project)["runs"]
        return run["case_version"], run["trials"][0]["status"]

    assert run(5) == (1, "passed")
    assert run(5) == (1, "passed"), "the same value is the same version"
    assert run(500) == (2, "failed"), "the closure's threshold is part of the version"
    assert run(500, limit=10) == (3, "failed"), "so is a module-level value it reads"
    (reads,) = sqlite_backend.rows(
        "SELECT v.definition FROM evals_app_caseversion v WHERE v.number = 3"
    )
    (check,) = sqlite_backend.json_value(reads[0])["checks"]
    assert check["reads"] == {"LIMIT": 10, "threshold": 500}
