"""The eval's own code that hangs, through the real `proctor eval`: a validator, an async
validator and a prepare that never return each end in their time limit (1 s here), and
`proctor eval` exits (each hangs for an hour: the subprocess's ceiling only guards against a
hang) with the right status and the sentence saying what hung."""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.running import AGENTS, Backend, only_run, write_eval

HANGING_EVAL = f"""
import asyncio
import time

from proctor import case, profile, suite, variant


def divide_works(ctx):
    print("about to wait forever")
    time.sleep(3600)
    return True


async def async_divide_works(ctx):
    await asyncio.sleep(3600)
    return True


def still_graded(ctx):
    return "Fixed the total." in ctx.answer()


def start_fixture_server(ctx):
    ctx.exec("echo starting the fixture server")
    time.sleep(3600)
    return {{"port": 4173}}


echo = variant("command", profile=profile("echo", dir={str(AGENTS)!r},
                                          run='bash "$PROCTOR_PROFILE_DIR/echo_agent.sh"'))

s = suite("hangs", prompt="fix the total", variants=[echo], cases=[
    case("hanging-validator", check_timeout_ms=1000, validate=[divide_works, still_graded]),
    case("hanging-async-validator", check_timeout_ms=1000, validate=async_divide_works),
    case("hanging-prepare", prepare_timeout_ms=1000, prepare=start_fixture_server,
         validate=still_graded),
])
"""

# Far beyond three 1 s limits on a busy machine, far below the hour each callable would hang.
CEILING_S = 600


@pytest.fixture(scope="module")
def hanging(module_backend: Backend, tmp_path_factory) -> tuple[Backend, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("hangs")
    write_eval(folder, "hangs.eval.py", HANGING_EVAL)
    result = module_backend.eval(folder, "--json", "--fail-under", "0", timeout=CEILING_S)
    assert result.returncode == 0, result.stdout + result.stderr
    return module_backend, json.loads(result.stdout)


def test_proctor_eval_ends_with_every_trial_reported(hanging) -> None:
    _backend, report = hanging
    assert sorted(run["case"] for run in report["runs"]) == [
        "hanging-async-validator",
        "hanging-prepare",
        "hanging-validator",
    ]


def test_a_hanging_validator_fails_its_check_and_the_next_check_still_runs(hanging) -> None:
    backend, report = hanging
    (trial,) = only_run(report, "hanging-validator")["trials"]
    assert trial["status"] == "failed"
    hung, graded = trial["checks"]
    assert hung["passed"] is False
    assert hung["message"] == "validator divide_works did not finish within 1 s"
    assert graded["passed"] is True
    (trial_id,) = backend.trial_ids(report["batch"], "hanging-validator")
    assert backend.rows(
        'SELECT passed, output FROM evals_app_check WHERE trial_id = ? ORDER BY "index"',
        trial_id,
    )[0] == (False, "about to wait forever\n"), "what it printed before it hung is kept"


def test_a_hanging_async_validator_fails_its_check(hanging) -> None:
    _backend, report = hanging
    (trial,) = only_run(report, "hanging-async-validator")["trials"]
    assert trial["status"] == "failed"
    (check,) = trial["checks"]
    assert check["message"] == "validator async_divide_works did not finish within 1 s"


def test_a_hanging_prepare_errors_the_trial_before_the_agent_runs(hanging) -> None:
    backend, report = hanging
    (trial,) = only_run(report, "hanging-prepare")["trials"]
    assert trial["status"] == "errored"
    assert trial["checks"] == []
    (trial_id,) = backend.trial_ids(report["batch"], "hanging-prepare")
    assert backend.scalar("SELECT error FROM evals_app_trial WHERE id = ?", trial_id) == (
        "prepare did not finish within 1 s"
    )
    logged = [data["text"] for kind, data in backend.events(trial_id) if kind == "Log"]
    assert "starting the fixture server" in logged, "prepare's output up to the hang is kept"
    assert not [kind for kind, _data in backend.events(trial_id) if kind == "Message"]


def test_the_limits_are_part_of_the_case_version(hanging) -> None:
    backend, report = hanging
    (limits,) = backend.rows(
        "SELECT v.definition FROM evals_app_caseversion v JOIN evals_app_case c "
        "ON v.case_id = c.id WHERE c.slug = ?",
        "hanging-prepare",
    )[0]
    assert backend.json_value(limits)["limits"]["prepare_timeout_ms"] == 1000
