"""Model judges end to end through `proctor eval`: a judge alone or beside a validator grades
the trial; its prompt and answer are kept as a consultation; an answer that cannot be read is a
failed check that says so; --judge-model and --responder-model reach the endpoint."""

from __future__ import annotations

import json

import pytest
from e2e.running import Backend, write_eval
from fakes.openai_server import FakeModelServer

from conversations.model_script import JUDGE, RESPONDER, ModelScript, answer, done, graded
from conversations.recorded import (
    RecordedTrial,
    recorded_trial,
    responder_texts,
    run_eval,
    talker_profile,
)

JUDGE_MODEL = "judge-x"
RESPONDER_MODEL = "responder-y"

JUDGED_EVAL = f"""
from proctor import Verdict, case, command, judge, profile, responder, suite, variant

talker = {talker_profile()}


def has_cache(ctx):
    # VALIDATOR-SOURCE-MARKER
    return Verdict(ctx.exists("cache.py"), "cache.py exists")


def request(case_id, markers=""):
    return {{"request": f"[case:{{case_id}}] {{markers}} add caching"}}


judged = suite(
    "judged",
    prompt="{{{{request}}}}",
    cases=[
        case("judge-passes", variables=request("judge-passes"), expected_output="EXPECTED-MARKER",
             validate=judge("The agent added a cache.")),
        case("judge-fails", variables=request("judge-fails"), validate=judge("The agent added a Redis cache.")),
        case("judge-unreadable", variables=request("judge-unreadable"), validate=judge("The agent added a cache.")),
        case("judge-below-threshold", variables=request("judge-below-threshold"),
             validate=judge("The agent added a cache.", threshold=0.8)),
        case("judge-beside-validator", variables=request("judge-beside-validator"),
             validate=[has_cache, judge("The answer names the file it changed.", name="names the file")]),
        case("responder-model", variables=request("responder-model", "[ask]"), user=responder(),
             validate=command("test -f cache.py")),
    ],
    variants=[variant("command", profile=talker)],
)
"""


@pytest.fixture(scope="module")
def judge_script(module_server: FakeModelServer) -> ModelScript:
    script = ModelScript().install(module_server)
    script.judge("[case:judge-passes]", graded(True, 0.9, "cache.py holds an in-memory cache"))
    script.judge("[case:judge-fails]", graded(False, 0.2, "the cache is in memory, not in Redis"))
    script.judge("[case:judge-unreadable]", "Looks good to me!")
    script.judge("[case:judge-below-threshold]", graded(True, 0.5, "a cache, but a thin one"))
    script.judge("[case:judge-beside-validator]", graded(True, 1.0, "it names cache.py"))
    script.responder("[case:responder-model]", answer("In memory, please."), done())
    return script


@pytest.fixture(scope="module")
def judged_batch(module_sqlite: Backend, judge_script: ModelScript, tmp_path_factory):
    folder = tmp_path_factory.mktemp("judged")
    write_eval(folder, "judged.eval.py", JUDGED_EVAL)
    return run_eval(
        module_sqlite,
        folder,
        "-j",
        "2",
        "--judge-model",
        JUDGE_MODEL,
        "--responder-model",
        RESPONDER_MODEL,
    )


def judged(backend: Backend, batch, case_id: str) -> RecordedTrial:
    return recorded_trial(backend, batch.batch, case_id)


def test_a_judge_that_passes_the_work_passes_the_trial(
    module_sqlite, judged_batch, judge_script
) -> None:
    trial = judged(module_sqlite, judged_batch, "judge-passes")

    assert trial.row["status"] == "passed"
    (check,) = trial.checks()
    assert (check["kind"], bool(check["passed"]), check["message"]) == (
        "judge",
        True,
        "cache.py holds an in-memory cache",
    )
    (consultation,) = trial.consultations("judge")
    assert (consultation["verdict"], consultation["check_index"], consultation["model"]) == (
        "passed",
        0,
        JUDGE_MODEL,
    )
    assert "The agent added a cache." in json.dumps(consultation["prompt"])
    assert json.loads(trial.artifact("judges/check-1/verdict.json"))["verdict"] == "passed"
    shown = trial.artifact("judges/check-1/prompt.json")
    # The judge grades the evidence against its rubric, not against the case's expected output.
    assert (
        "The agent added a cache." in shown
        and "Done: added an in-memory cache in cache.py." in shown
    )
    assert "EXPECTED-MARKER" not in shown


def test_a_judge_that_fails_the_work_fails_the_trial(module_sqlite, judged_batch) -> None:
    trial = judged(module_sqlite, judged_batch, "judge-fails")

    assert trial.row["status"] == "failed"
    (check,) = trial.checks()
    assert not check["passed"]
    assert check["message"] == "the cache is in memory, not in Redis"
    assert trial.consultations("judge")[0]["verdict"] == "failed"


def test_an_unreadable_judge_answer_is_a_failed_check_that_says_so(
    module_sqlite, judged_batch
) -> None:
    trial = judged(module_sqlite, judged_batch, "judge-unreadable")

    assert trial.row["status"] == "failed"
    (check,) = trial.checks()
    assert not check["passed"]
    assert "could not be read" in check["message"] and "Looks good to me!" in check["message"]
    (consultation,) = trial.consultations("judge")
    assert consultation["answer"] == "Looks good to me!"
    assert consultation["cause"] == "malformed_verdict"
    assert trial.has_artifact("judges/check-1/prompt.json")


def test_a_judge_score_under_its_threshold_fails_even_when_it_says_passed(
    module_sqlite, judged_batch
) -> None:
    trial = judged(module_sqlite, judged_batch, "judge-below-threshold")

    (check,) = trial.checks()
    assert not check["passed"]
    assert "threshold" in check["message"]


def test_a_judge_beside_a_validator_grades_as_its_own_check(
    module_sqlite, judged_batch, judge_script
) -> None:
    trial = judged(module_sqlite, judged_batch, "judge-beside-validator")

    assert trial.row["status"] == "passed"
    assert [(c["index"], c["kind"], c["name"], bool(c["passed"])) for c in trial.checks()] == [
        (0, "validator", "has_cache", True),
        (1, "judge", "names the file", True),
    ]
    (consultation,) = trial.consultations("judge")
    assert consultation["check_index"] == 1
    assert trial.has_artifact("judges/check-2/prompt.json") and trial.has_artifact(
        "judges/check-2/verdict.json"
    )
    # The judge is not shown the other checks.
    (request,) = judge_script.sent(JUDGE, "[case:judge-beside-validator]")
    assert "VALIDATOR-SOURCE-MARKER" not in json.dumps(request) and "has_cache" not in json.dumps(
        request
    )


def test_the_command_line_chooses_the_judge_and_responder_models(
    judged_batch, judge_script
) -> None:
    judge_requests = [
        body
        for key in (
            "[case:judge-passes]",
            "[case:judge-fails]",
            "[case:judge-unreadable]",
            "[case:judge-beside-validator]",
            "[case:responder-model]",
        )
        for body in judge_script.sent(JUDGE, key)
    ]
    responder_requests = judge_script.sent(RESPONDER, "[case:responder-model]")

    assert len(responder_requests) == 2
    assert {body["model"] for body in responder_requests} == {RESPONDER_MODEL}
    # The responder-model case is graded by a command: only the four judged cases reach a judge.
    assert len(judge_requests) == 4
    assert {body["model"] for body in judge_requests} == {JUDGE_MODEL}
    for body in judge_requests:
        system, _ = responder_texts(body)
        assert '"passed"' in system
