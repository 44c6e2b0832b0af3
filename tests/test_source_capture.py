"""Source capture: a case version stores the text of the eval module and of each file its
validators and prepare come from; ``capture_source=False`` stores none, and the version still
follows the code."""

from __future__ import annotations

import textwrap
from pathlib import Path

from evals_app.loading import load_file
from evals_app.resolution import resolve_case

EVAL = """
from proctor import assertion, case, command, judge, suite, variant

from checks import has_answer, prepare


def short(ctx):
    return len(ctx.answer) < 100


graded = suite(
    "graded",
    prompt="Answer",
    variants=[variant("chat", model="m")],
    cases=[
        case(
            "answer",
            validate=[
                has_answer,
                command("true"),
                judge("Is it right?"),
                assertion("python", short),
                assertion("icontains", "yes"),
            ],
            prepare=prepare,
        )
    ],
    CAPTURE
)
"""

CHECKS = """
def has_answer(ctx):
    return bool(ctx.answer)


def prepare(ctx):
    return {}
"""


def project(tmp_path: Path, *, capture: bool, check: str = CHECKS) -> Path:
    """An eval module in a project, importing a validator and its prepare from a file beside it."""
    root = tmp_path / "project"
    (root / "evals").mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "p"\n')
    source = EVAL.replace("CAPTURE", "" if capture else "capture_source=False,")
    (root / "evals" / "graded.eval.py").write_text(textwrap.dedent(source))
    (root / "evals" / "checks.py").write_text(textwrap.dedent(check))
    return root / "evals" / "graded.eval.py"


def resolved(module: Path):
    (suite,) = load_file(module).suites
    return resolve_case(suite, suite.cases[0], module)


def test_it_stores_the_module_and_the_file_its_checks_come_from(
    tmp_path: Path,
):
    module = project(tmp_path, capture=True)

    result = resolved(module)

    assert list(result.sources) == ["evals/graded.eval.py", "evals/checks.py"]
    assert result.sources["evals/checks.py"] == textwrap.dedent(CHECKS)
    assert result.definition["prepare"]["qualname"] == "prepare"
    kinds = [(c.kind, c.name) for c in result.checks]
    assert kinds == [
        ("validator", "has_answer"),
        ("command", "true"),
        ("judge", "Is it right?"),
        ("assertion", "short"),
        ("assertion", "icontains: yes"),
    ]
    # The trial page shows the code of a captured callable from where it sits.
    located = [c.source_ref.get("qualname") for c in result.checks]
    assert located == ["has_answer", None, None, "short", None]


def test_capture_source_false_stores_no_source_yet_a_changed_check_is_a_new_version(
    tmp_path: Path,
):
    module = project(tmp_path, capture=False)
    before = resolved(module)

    changed = CHECKS.replace("bool(ctx.answer)", "ctx.answer.strip() != ''")
    module = project(tmp_path / "later", capture=False, check=changed)
    after = resolved(module)

    assert before.sources == {} and after.sources == {}
    assert before.definition_hash != after.definition_hash
