"""Variant options are checked against what harnesses and sandboxes declare they read: every
option the runner's code reads is declared (so no valid option is refused), and what each kind
declares is accepted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from proctor import profile, variant
from runner.batches.variant_options import TRIAL_OPTIONS, variant_option_problems
from runner.harnesses import HARNESSES
from runner.sandboxes import SANDBOX_KINDS

RUNNER = Path(__file__).resolve().parent.parent / "runner"
# `options.get("x"` and `options["x"]` on a variant's options (self.options in the agent CLIs).
READ = re.compile(r"""options(?:\.get\(|\[)\s*["']([a-z_]+)["']""")
# Readers of options that are not a variant's: management commands' argparse options, the
# promptfoo importer's provider options, a batch's options.
NOT_VARIANT_OPTIONS = ("management", "importers", "batches", "jobs", "trial/spec.py")


def declared() -> set[str]:
    names = set(TRIAL_OPTIONS)
    for kind in [*HARNESSES.values(), *SANDBOX_KINDS.values()]:
        names |= kind.option_names
    return names


def test_every_option_the_runner_reads_is_declared():
    read = {
        (str(path.relative_to(RUNNER)), name)
        for path in RUNNER.rglob("*.py")
        if not any(part in str(path.relative_to(RUNNER)) for part in NOT_VARIANT_OPTIONS)
        for name in READ.findall(path.read_text(encoding="utf-8"))
    }
    assert {name for _, name in read} >= {"prices", "memory", "args", "tools"}, read
    assert [(file, name) for file, name in sorted(read) if name not in declared()] == []


def some_value(option: str) -> object:
    return {"tools": [], "args": [], "config": {}, "expose": [], "prices": {}}.get(option, "x")


@pytest.mark.parametrize("harness", sorted(HARNESSES))
@pytest.mark.parametrize("sandbox", sorted(SANDBOX_KINDS))
def test_what_a_harness_and_sandbox_declare_is_accepted(harness: str, sandbox: str):
    names = HARNESSES[harness].option_names | SANDBOX_KINDS[sandbox].option_names | TRIAL_OPTIONS
    built = variant(
        harness,
        sandbox=sandbox,
        profile=profile("p", run="true"),
        **{name: some_value(name) for name in names},
    )

    assert variant_option_problems(built) == []


def test_a_typo_is_named_with_the_close_match():
    (problem,) = variant_option_problems(variant("command", sandbox="docker", memroy="64m"))

    assert "unknown option memroy for the docker sandbox and the command harness" in problem
    assert problem.endswith("did you mean memory?")
