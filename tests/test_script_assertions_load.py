"""promptfoo-style code in eval files: a ``file://`` script is read when the eval loads,
relative to the file that names it (a Python eval file or a JSON one, wherever the command
runs from), and a missing file is one sentence naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals_app.loading import LoadError, load_file
from proctor.scripts import Script

CHECKS_JS = "module.exports.polite = (output) => !/sorry/i.test(output);\n"


def only_check(path: Path):
    (suite,) = load_file(path).suites
    ((check,),) = [c.validate for c in suite.cases]
    return check


def test_a_python_eval_files_script_is_read_beside_it(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "evals" / "checks").mkdir(parents=True)
    (tmp_path / "evals" / "checks" / "tone.js").write_text(CHECKS_JS)
    (tmp_path / "evals" / "tone.eval.py").write_text(
        "from proctor import assertion, case, suite, variant\n"
        'tone = suite("tone", prompt="hi", variants=[variant("chat", model="m")], cases=[\n'
        '    case("polite", validate=[assertion("javascript", "file://checks/tone.js:polite",\n'
        '                                       transform="file://checks/tone.js")])])\n'
    )
    monkeypatch.chdir(tmp_path)  # not the eval file's folder

    check = only_check(tmp_path / "evals" / "tone.eval.py")

    # Where it was read is kept too: it runs among its own folder's files.
    where = str(tmp_path / "evals" / "checks" / "tone.js")
    assert check.script == Script("javascript", CHECKS_JS, "polite", "checks/tone.js", where)
    assert check.transform == (Script("javascript", CHECKS_JS, None, "checks/tone.js", where),)
    assert check.label == "javascript: file://checks/tone.js:polite"


def test_a_json_eval_files_script_is_read_beside_it(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "checks.py").write_text("def get_assert(output, context):\n    return 1\n")
    (tmp_path / "tone.eval.json").write_text(
        json.dumps(
            {
                "variants": [{"harness": "chat", "model": "m"}],
                "evals": [
                    {
                        "id": "polite",
                        "prompt": "hi",
                        "assertions": [
                            {"type": "python", "value": "file://checks.py", "threshold": 0.5}
                        ],
                    }
                ],
            }
        )
    )
    monkeypatch.chdir("/")

    check = only_check(tmp_path / "tone.eval.json")

    assert (check.script.path, check.script.language, check.threshold) == (
        "checks.py",
        "python",
        0.5,
    )
    assert "get_assert" in check.script.text


def test_a_missing_script_file_is_one_sentence_naming_it(tmp_path: Path) -> None:
    (tmp_path / "tone.eval.py").write_text(
        "from proctor import assertion, case, suite, variant\n"
        'tone = suite("tone", prompt="hi", variants=[variant("chat", model="m")], cases=[\n'
        '    case("polite", validate=[assertion("python", "file://gone.py")])])\n'
    )

    with pytest.raises(LoadError) as failure:
        load_file(tmp_path / "tone.eval.py")

    (problem,) = failure.value.problems
    assert "file://gone.py: cannot read" in problem.message
    assert "gone.py" in problem.message and "Traceback" not in problem.message
