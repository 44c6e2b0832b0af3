"""The JUnit report of outcomes a live run rarely gives at once: an infrastructure error, a
timeout, a cell that never ran, text XML cannot hold; each valid against the JUnit schema."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import xmlschema

from runner.batches.junit import junit_xml, write_junit

SCHEMA = xmlschema.XMLSchema(Path(__file__).resolve().parent / "junit.xsd")


def _trial(index: int, status: str, **fields) -> dict:
    return {
        "index": index,
        "status": status,
        "duration_ms": 1250,
        "error": "",
        "checks": [],
        "url": f"http://proctor.test/trials/{index}/",
        **fields,
    }


REPORT = {
    "batch": 7,
    "label": "nightly",
    "url": "http://proctor.test/batches/7/",
    "runs": [
        {
            "suite": "calc",
            "case": "broken-sandbox",
            "case_version": 2,
            "variant": "careful",
            "trials": [_trial(0, "passed"), _trial(1, "errored", error="docker is not running")],
        },
        {
            "suite": "calc",
            "case": "slow",
            "case_version": 1,
            "variant": "careful",
            "trials": [
                _trial(0, "timed_out"),
                _trial(
                    1,
                    "failed",
                    checks=[
                        {
                            "name": "tests pass",
                            "passed": False,
                            "message": "bell \x07 and NUL \x00",
                        },
                        {"name": "lint", "passed": True, "message": ""},
                    ],
                ),
            ],
        },
        {
            "suite": "notes",
            "case": "queued",
            "case_version": 1,
            "variant": "hasty",
            "trials": [_trial(0, "queued", duration_ms=None)],
        },
    ],
}


def _cases(report: dict) -> dict[str, dict]:
    tree = SCHEMA.to_dict(junit_xml(report).decode())
    return {case["@classname"]: case for suite in tree["testsuite"] for case in suite["testcase"]}


def test_errors_timeouts_and_skips_are_told_apart_and_valid():
    SCHEMA.validate(junit_xml(REPORT).decode())
    cases = _cases(REPORT)

    error = cases["calc.broken-sandbox"]["error"]
    assert error["@type"] == "errored"
    assert "error: docker is not running" in error["$"]
    failure = cases["calc.slow"]["failure"]
    assert failure["@type"] == "failed+timed_out"
    assert failure["@message"] == "0/2 trials passed (case version 1)"
    assert "tests pass failed: bell \ufffd and NUL \ufffd" in failure["$"]
    assert "lint" not in failure["$"]
    assert cases["notes.queued"]["skipped"]["@message"] == "no trial finished"


def test_the_totals_add_up():
    tree = SCHEMA.to_dict(junit_xml(REPORT).decode())
    assert (tree["@tests"], tree["@failures"], tree["@errors"]) == (3, 1, 1)
    assert [s["@name"] for s in tree["testsuite"]] == ["calc", "notes"]
    assert tree["testsuite"][0]["@time"] == pytest.approx(5.0)


def test_the_file_is_written_whole_in_a_new_folder(tmp_path):
    target = tmp_path / "out" / "deep" / "junit.xml"
    written = write_junit(REPORT, target)
    assert written == target
    SCHEMA.validate(str(target))
    assert [p.name for p in target.parent.iterdir()] == ["junit.xml"]


def test_the_file_gets_the_mode_of_any_new_file(tmp_path):
    """Readable by the CI job's other steps as any file the job makes: 0666 less the umask,
    not a temporary file's 0600."""
    target = tmp_path / "junit.xml"
    previous = os.umask(0o022)
    try:
        write_junit(REPORT, target)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_an_unwritable_junit_path_is_refused_before_anything_runs(tmp_path):
    from conftest import proctor_env, run_proctor

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    env = proctor_env(tmp_path / "home")

    result = run_proctor("eval", "--junit", str(blocker / "junit.xml"), cwd=tmp_path, env=env)

    assert result.returncode == 2
    assert result.stderr.strip() == f"--junit {blocker / 'junit.xml'}: {blocker} is not a folder"
    assert blocker.read_text() == "not a folder"
    assert not (tmp_path / "home" / "proctor.sqlite3").exists()  # no batch was recorded
    folder = run_proctor("eval", "--junit", str(tmp_path), cwd=tmp_path, env=env)
    assert folder.returncode == 2 and "is a folder; give a file name" in folder.stderr
