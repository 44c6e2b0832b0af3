"""Generated Python: every outside text lands as a literal that reads back exactly, never as
code; the files read like hand-written ones and pass ruff."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from importers.conftest import ruff_problems
from runner.importers.python_source import (
    Module,
    Name,
    Spread,
    call,
    comment_text,
    render,
    string_literal,
)

HOSTILE = [
    "plain",
    'say "hi"',
    "it's",
    "both ' and \"",
    '""" + __import__("os").system("true") + """',
    "'); import os; ('",
    "line one\nline two\r\nline three\rend",
    "back\\slash at the end \\",
    "tab\tand nul \x00 and bell \x07",
    "unicode — café 🎉 \u2028 \u2029 \x85",
    "{{ message }} and {% if x %}",
    "x" * 300,
    " ".join(["word"] * 80) + "\n" + "trailing newline\n",
    "",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_it_writes_text_as_a_literal_that_reads_back_exactly(text: str) -> None:
    assert ast.literal_eval(string_literal(text)) == text
    rendered = render(call("case", text, name=text, variables={text: [text]}), indent=1)
    tree = ast.parse(rendered, mode="eval")
    assert isinstance(tree.body, ast.Call)
    assert [ast.literal_eval(a) for a in tree.body.args] == [text]
    assert {k.arg: ast.literal_eval(k.value) for k in tree.body.keywords} == {
        "name": text,
        "variables": {text: [text]},
    }


def test_it_prefers_double_quotes_and_keeps_short_calls_on_one_line() -> None:
    assert string_literal("hello") == '"hello"'
    assert string_literal('say "hi"') == "'say \"hi\"'"
    assert render(call("assertion", "icontains", "booked", weight=2, metric="disposition")) == (
        'assertion("icontains", "booked", weight=2, metric="disposition")'
    )
    assert render(call("simulated_user", "persona", model=None)) == 'simulated_user("persona")'


@pytest.mark.parametrize("text", HOSTILE)
def test_a_comment_stays_one_line(text: str) -> None:
    assert "\n" not in comment_text(text) and "\r" not in comment_text(text)
    source = Module(notes=[text, f"  - assertion {text}"]).source()
    assert ast.parse(source).body == []


def test_a_module_imports_what_it_calls_and_passes_ruff(tmp_path: Path) -> None:
    module = Module(
        header=['Header with """quotes""" and a backslash \\.', "", "Second paragraph."],
        notes=["Not translated:", "  - assertion javascript\nimport os"],
    )
    shared = module.assign(
        "shared_checks", [call("assertion", "not-icontains", "[object Object]", weight=3)]
    )
    module.assign(
        "calls",
        call(
            "suite",
            "calls",
            prompt="Hello.",
            variants=[call("variant", "chat", model="gpt-4.1")],
            cases=[
                call(
                    "case",
                    "one",
                    user=call("simulated_user", "A long persona. " * 20, max_turns=12),
                    validate=[
                        Spread(shared),
                        call("assertion", "llm-rubric", "Polite.", metric="tone"),
                    ],
                    threshold=0.6,
                )
            ],
        ),
    )
    path = tmp_path / "generated.eval.py"
    path.write_text(module.source(), encoding="utf-8")
    assert ruff_problems(path) == ""
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    suite = namespace["calls"]
    assert suite.cases[0].user.instructions == "A long persona. " * 20
    assert [a.type for a in suite.cases[0].checks] == ["not-icontains", "llm-rubric"]
    assert (
        "from proctor import assertion, case, simulated_user, suite, variant\n" in module.source()
    )


def test_it_refuses_names_that_are_not_identifiers() -> None:
    with pytest.raises(ValueError):
        Name("os.system('x')")
    with pytest.raises(ValueError):
        call("case", "x", **{"not valid": 1})
    with pytest.raises(ValueError):
        Module().assign("import", 1)
