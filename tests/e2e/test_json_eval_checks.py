"""The checks of a JSON eval file: ``validate`` (a shell command, or a list of commands and
judges) and ``assertions`` (rubrics) together. A JSON file has no validator to run a command
from, so its list may hold commands, which a Python file's may not; each command is graded
as its own check."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import proctor_env, run_proctor

from e2e.running import write_eval
from evals_app.json_evals import load_json_suites
from proctor import Command, Judge

VARIANTS = [
    {"harness": "command", "name": "v", "profile": {"name": "p", "run": "echo hi > out.txt"}}
]


def write_json_eval(folder: Path, case: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "variants.json").write_text(json.dumps(VARIANTS))
    path = folder / "checks.eval.json"
    path.write_text(json.dumps(case))
    return path


def test_each_command_of_a_validate_list_is_its_own_check(tmp_path: Path) -> None:
    write_json_eval(
        tmp_path,
        {
            "id": "two-commands",
            "prompt": "write out.txt",
            "validate": [
                {"command": "test -f out.txt"},
                {"command": "false", "name": "never", "timeout_ms": 2000},
            ],
        },
    )
    done = run_proctor(
        "eval", "checks.eval.json", "--json", cwd=tmp_path, env=proctor_env(tmp_path / "home")
    )

    assert done.returncode == 0, done.stderr
    (trial,) = json.loads(done.stdout)["runs"][0]["trials"]
    assert [(c["name"], c["passed"], c["message"]) for c in trial["checks"]] == [
        ("test -f out.txt", True, "exited 0"),
        ("never", False, "exited 1"),
    ]
    assert trial["status"] == "failed"


def test_a_command_and_assertions_are_all_kept(tmp_path: Path) -> None:
    """Before, a ``validate`` command made the file's assertions vanish without a word."""
    path = write_json_eval(
        tmp_path,
        {
            "id": "command-and-rubric",
            "prompt": "write out.txt",
            "validate": "test -f out.txt",
            "assertions": ["says hi"],
        },
    )
    (suite,) = load_json_suites(path)
    (case,) = suite.cases
    assert [type(check) for check in case.checks] == [Command, Judge]
    assert case.checks[1].rubric == "says hi"  # type: ignore[union-attr]


def test_a_bad_command_in_a_json_list_is_named_by_its_place(tmp_path: Path) -> None:
    write_json_eval(
        tmp_path,
        {
            "id": "bad-limit",
            "prompt": "write out.txt",
            "validate": [{"command": "true"}, {"command": "true", "timeout_ms": 5}],
        },
    )
    done = run_proctor("eval", "checks.eval.json", cwd=tmp_path, env=proctor_env(tmp_path / "home"))

    assert done.returncode == 2
    assert done.stderr.strip() == (
        "checks.eval.json: suite checks, case bad-limit: validate[2]: command() timeout_ms must be "
        "a whole number from 1,000 to 3,600,000 milliseconds (got 5)"
    )


def test_a_python_files_list_still_refuses_a_command(tmp_path: Path) -> None:
    write_eval(
        tmp_path,
        "listed.eval.py",
        """
        from proctor import case, command, profile, suite, variant

        s = suite("listed", prompt="work",
                  cases=[case("listed-command", validate=[command("true")])],
                  variants=[variant("command", profile=profile("p", run="true"))])
        """,
    )
    done = run_proctor("eval", "listed.eval.py", cwd=tmp_path, env=proctor_env(tmp_path / "home"))

    assert done.returncode == 2
    assert "validate[1] is a command(), which cannot go in a list" in done.stderr


def test_a_judge_threshold_that_is_no_number_is_one_line(tmp_path: Path) -> None:
    """Before: "could not convert string to float" without the case, or a traceback."""
    write_json_eval(
        tmp_path,
        {"id": "odd-judge", "prompt": "p", "validate": [{"judge": "ok", "threshold": [1]}]},
    )
    done = run_proctor("eval", "checks.eval.json", cwd=tmp_path, env=proctor_env(tmp_path / "home"))

    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert (
        "checks.eval.json: suite checks, case odd-judge: judge 'ok': threshold must be a number "
        "from 0 to 1 (got [1])"
    ) in done.stderr


def test_weighted_assertions_in_json_grade_against_the_threshold(tmp_path: Path) -> None:
    """Before, an assertion object became a judge whose rubric was the object's Python repr."""
    write_json_eval(
        tmp_path,
        {
            "id": "weighted",
            "prompt": "write out.txt",
            "assertions": [
                {
                    "type": "not-icontains",
                    "value": "[object Object]",
                    "weight": 3,
                    "metric": "leak",
                },
                {"type": "icontains", "value": "never said", "weight": 1, "metric": "recall"},
            ],
            "threshold": 0.6,
            "tags": "smoke",
        },
    )
    done = run_proctor(
        "eval", "checks.eval.json", "--json", cwd=tmp_path, env=proctor_env(tmp_path / "home")
    )

    assert done.returncode == 0, done.stderr
    (trial,) = json.loads(done.stdout)["runs"][0]["trials"]
    assert [(c["name"], c["passed"]) for c in trial["checks"]] == [
        ("leak", True),
        ("recall", False),
    ]
    # 3 of 4 weighted points reach 0.6.
    assert trial["status"] == "passed"
    (suite,) = load_json_suites(tmp_path / "checks.eval.json")
    assert suite.cases[0].tags == ("smoke",)


def test_a_lone_rubric_is_one_judge(tmp_path: Path) -> None:
    path = write_json_eval(
        tmp_path, {"id": "one-rubric", "prompt": "p", "assertions": "says hi politely"}
    )
    (suite,) = load_json_suites(path)
    (check,) = suite.cases[0].checks
    assert isinstance(check, Judge) and check.rubric == "says hi politely"


def test_each_broken_eval_of_a_file_is_named_with_its_case(tmp_path: Path) -> None:
    folder = tmp_path
    (folder / "variants.json").write_text(json.dumps(VARIANTS))
    (folder / "checks.eval.json").write_text(
        json.dumps(
            [
                {"id": "numbered", "prompt": "p", "assertions": [5]},
                {"id": "typo", "prompt": "p", "assertions": [{"type": "icontains", "valeu": "x"}]},
                {"id": "no-prompt", "validate": "true"},
                {"prompt": "p", "bogus": 1},
            ]
        )
    )
    done = run_proctor("eval", "checks.eval.json", cwd=tmp_path, env=proctor_env(tmp_path / "home"))

    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "checks.eval.json: suite checks, case numbered: assertions[1] must be a rubric (text) or "
        'an assertion object like {"type": "icontains", "value": "booked", "weight": 2} (got 5)',
        "checks.eval.json: suite checks, case typo: assertions[1]: unknown field 'valeu' (an "
        "assertion has type, value, weight, metric, name, threshold, transform, grader)",
        "checks.eval.json: suite checks, case no-prompt: prompt is required",
        "checks.eval.json: suite checks: eval 4: unknown field bogus",
    ]
