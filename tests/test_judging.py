"""Model judges grading a finished trial against a rubric, through a fake model server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fakes.openai_server import FakeModelServer, Reply, fake_model_server_fixture  # noqa: F401

from proctor import judge
from runner.core.transcript import Transcript
from runner.grading.checks import CheckContext
from runner.grading.judges import judge_config, run_judge
from runner.llm import LLMConfig

RUBRIC = "The agent explains why the cache key must include the currency."
ANSWER = "Done: prices are cached per (product, currency) for 60 seconds."
SECRET_FROM_PREPARE = "sk-prepared-9d8c7b"


class UntouchableSandbox:
    """A judge reads the check context only; any use of the sandbox fails the test."""

    workspace = "/workspace"

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the judge used the sandbox ({name})")


def trial_context() -> CheckContext:
    transcript = Transcript()
    first = transcript.start_turn("Requests to the pricing API are slow. Can you add caching?")
    first.messages.append({"role": "assistant", "text": "Should the cache be per currency?"})
    second = transcript.start_turn("Yes, per currency.")
    second.messages.append({"role": "assistant", "text": ANSWER})
    return CheckContext(
        sandbox=UntouchableSandbox(),  # type: ignore[arg-type]
        transcript=transcript,
        prepared={"expected_output": "A working cache under 100ms", "token": SECRET_FROM_PREPARE},
    )


def config_for(server: FakeModelServer, **overrides: Any) -> LLMConfig:
    values: dict[str, Any] = {"base_url": server.url, "model": "judge-model", "timeout_s": 10.0}
    values.update(overrides)
    return LLMConfig(**values)


def verdict(**fields: Any) -> str:
    return json.dumps(fields)


def test_a_judge_that_says_passed_passes_the_check(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script(
        verdict(passed=True, score=0.9, reason="It explains the currency in the key.")
    )
    correctness = judge(RUBRIC, name="explains the cache key")

    result, record = run_judge(
        correctness, trial_context(), config=config_for(fake_model_server), index=2
    )

    assert result.passed
    assert (result.kind, result.name, result.score) == ("judge", "explains the cache key", 0.9)
    assert result.message == "It explains the currency in the key."
    assert record.kind == "judge"
    assert record.check_index == 2
    assert (record.verdict, record.reason, record.cause) == (
        "passed",
        "It explains the currency in the key.",
        "",
    )
    assert record.model == "judge-model"
    assert record.prompt == fake_model_server.requests[0].body["messages"]
    assert json.loads(record.answer) == {
        "passed": True,
        "score": 0.9,
        "reason": "It explains the currency in the key.",
    }


def test_a_judge_that_says_failed_fails_the_check_with_its_reason(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script(
        verdict(passed=False, score=0.1, reason="The currency is never mentioned.")
    )

    result, record = run_judge(
        judge(RUBRIC), trial_context(), config=config_for(fake_model_server), index=0
    )

    assert not result.passed
    assert result.score == 0.1
    assert result.message == "The currency is never mentioned."
    assert result.name == RUBRIC
    assert record.verdict == "failed"


def test_a_passing_verdict_below_the_threshold_fails_and_says_why(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script(verdict(passed=True, score=0.4, reason="Mostly there."))

    result, record = run_judge(
        judge(RUBRIC, threshold=0.5), trial_context(), config=config_for(fake_model_server), index=0
    )

    assert not result.passed
    assert result.message == "Mostly there. (score 0.4 is below the threshold 0.5)"
    assert record.verdict == "failed"


def test_a_verdict_in_promptfoos_words_is_read(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script('{"reason": "Half done.", "pass": false, "score": 0.4}')

    result, record = run_judge(
        judge(RUBRIC), trial_context(), config=config_for(fake_model_server), index=0
    )

    assert not result.passed
    assert result.score == 0.4
    assert result.message == "Half done."
    assert record.verdict == "failed"


def test_a_verdict_without_a_score_scores_by_passed(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script('```json\n{"passed": true, "reason": "Fine."}\n```')

    result, _record = run_judge(
        judge(RUBRIC, threshold=1.0), trial_context(), config=config_for(fake_model_server), index=0
    )

    assert result.passed
    assert result.score == 1.0


@pytest.mark.parametrize(
    ("answer", "cause"),
    [
        (
            "I think the agent did a good job overall, so I would say it passes.",
            "malformed_verdict",
        ),
        (verdict(score=0.8, reason="no passed field"), "missing_verdict"),
        (verdict(passed=True, score=7, reason="seven out of ten"), "malformed_verdict"),
        (verdict(passed="maybe", reason="unsure"), "malformed_verdict"),
    ],
)
def test_an_answer_that_cannot_be_read_fails_the_check_and_says_so(
    fake_model_server: FakeModelServer, answer: str, cause: str
) -> None:
    fake_model_server.script(answer)

    result, record = run_judge(
        judge(RUBRIC), trial_context(), config=config_for(fake_model_server), index=1
    )

    assert not result.passed
    assert result.message == f"the judge's answer could not be read as a verdict: {answer[:200]!r}"
    assert record.cause == cause
    assert record.answer == answer
    assert record.verdict == ""


def test_a_long_unreadable_answer_is_quoted_only_in_part(
    fake_model_server: FakeModelServer,
) -> None:
    rambling = "The agent " + "did many things " * 40
    fake_model_server.script(rambling)

    result, _record = run_judge(
        judge(RUBRIC), trial_context(), config=config_for(fake_model_server), index=0
    )

    assert rambling[:200] in result.message
    assert rambling[:201] not in result.message


def test_a_judge_that_cannot_be_consulted_fails_the_check_with_the_cause(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script(Reply(status=503, body={"error": {"message": "overloaded"}}))

    result, record = run_judge(
        judge(RUBRIC), trial_context(), config=config_for(fake_model_server, max_retries=0), index=0
    )

    assert not result.passed
    assert (
        result.message
        == "judge could not be consulted: dispatch_failed: the model endpoint failed (HTTP 503): overloaded"
    )
    assert record.cause == "dispatch_failed"
    assert record.answer == ""


def test_a_judge_without_an_endpoint_fails_the_check_with_the_settings_to_set() -> None:
    result, record = run_judge(judge(RUBRIC), trial_context(), config=LLMConfig(), index=0)

    assert not result.passed
    assert result.message.startswith(
        "judge could not be consulted: dispatch_failed: no model endpoint configured"
    )
    assert record.cause == "dispatch_failed"


def test_the_judge_is_shown_the_rubric_and_the_evidence_only(
    fake_model_server: FakeModelServer,
) -> None:
    fake_model_server.script(verdict(passed=True, score=1, reason="ok"))

    run_judge(
        judge(RUBRIC),
        trial_context(),
        config=config_for(fake_model_server),
        index=0,
        plan="1. Add a TTL cache.",
    )

    request = fake_model_server.requests[0].body
    assert request["response_format"] == {"type": "json_object"}
    system, user = request["messages"]
    assert system["role"] == "system"
    assert "rubric" in system["content"]
    assert user["role"] == "user"
    assert f"<rubric>\n{RUBRIC}\n</rubric>" in user["content"]
    assert f"<final_answer>\n{ANSWER}\n</final_answer>" in user["content"]
    assert "Requests to the pricing API are slow" in user["content"]
    assert "[person]\nYes, per currency." in user["content"]
    assert "[agent]\nShould the cache be per currency?" in user["content"]
    assert "<plan>\n1. Add a TTL cache.\n</plan>" in user["content"]
    everything = json.dumps(request["messages"])
    assert "A working cache under 100ms" not in everything
    assert SECRET_FROM_PREPARE not in everything


def test_a_long_transcript_keeps_its_beginning_and_end(fake_model_server: FakeModelServer) -> None:
    fake_model_server.script(verdict(passed=True, score=1, reason="ok"))
    transcript = Transcript()
    turn = transcript.start_turn("Refactor the module.")
    turn.messages.append({"role": "assistant", "text": "FIRST-MESSAGE " + "x" * 50_000})
    turn.messages.append({"role": "assistant", "text": "y" * 50_000 + " LAST-MESSAGE"})
    ctx = CheckContext(sandbox=UntouchableSandbox(), transcript=transcript, prepared=None)  # type: ignore[arg-type]

    run_judge(judge(RUBRIC), ctx, config=config_for(fake_model_server), index=0)

    user = fake_model_server.requests[0].body["messages"][1]["content"]
    conversation = user.split("<conversation>")[1].split("</conversation>")[0]
    assert "FIRST-MESSAGE" in conversation
    assert "LAST-MESSAGE" in conversation
    assert len(conversation) < 25_000


def test_a_judge_can_consult_a_command(tmp_path) -> None:
    seen = tmp_path / "stdin.json"
    config = LLMConfig(
        command=f'cat > {seen}; echo \'{{"passed": true, "score": 0.8, "reason": "good"}}\''
    )

    result, record = run_judge(judge(RUBRIC), trial_context(), config=config, index=0)

    assert result.passed
    assert result.message == "good"
    assert json.loads(seen.read_text())["json"] is True
    assert record.prompt == json.loads(seen.read_text())["messages"]


def test_a_judges_own_model_is_used_unless_the_command_line_names_one(settings) -> None:
    settings.PROCTOR_LLM_BASE_URL = "http://models.internal:8000/v1"
    settings.PROCTOR_LLM_MODEL = "default-model"
    settings.PROCTOR_LLM_COMMAND = None

    assert judge_config(judge(RUBRIC)).model == "default-model"
    assert judge_config(judge(RUBRIC, model="judge-model")).model == "judge-model"
    assert (
        judge_config(judge(RUBRIC, model="judge-model"), cli_model="cli-model").model == "cli-model"
    )


@pytest.mark.parametrize(
    ("check", "said"),
    [
        (judge(""), "judge() needs a rubric, the text the model grades by"),
        (
            judge("ok", threshold="high"),
            "judge 'ok': threshold must be a number from 0 to 1 (got 'high')",
        ),  # type: ignore[arg-type]
        (
            judge("ok", threshold=True),
            "judge 'ok': threshold must be a number from 0 to 1 (got True)",
        ),  # type: ignore[arg-type]
        (
            judge("ok", threshold=1.5),
            "judge 'ok': threshold must be a number from 0 to 1 (got 1.5)",
        ),
        (judge("ok", model=3), "judge 'ok': model must be text, or left out (got 3)"),  # type: ignore[arg-type]
        (judge("ok", name=""), "judge 'ok': name must be text, or left out (got '')"),
    ],
    ids=["no rubric", "threshold text", "threshold bool", "threshold above 1", "model", "name"],
)
def test_a_judge_a_model_could_not_grade_by_is_refused_at_load(check, said: str) -> None:
    """Before, the first and the last two loaded (an empty rubric graded against nothing)."""
    from proctor import case, suite, variant
    from proctor.rules import case_problems

    judged = case("judged", validate=check)
    s = suite("s", prompt="p", cases=[judged], variants=[variant("command")])

    assert [problem for problem in case_problems(s, judged) if said in problem]
