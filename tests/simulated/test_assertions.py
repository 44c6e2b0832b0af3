"""Weighted assertions end to end through `proctor eval`: every type passing and failing, weight 0
as information only, a case's threshold against the weighted score, and the exact scores, weights
and metrics stored for the dashboard. Broken assertions are refused when the file loads.

The graded cases share one batch: the caller agent answers exactly what a ``SAY:`` prompt holds,
and the fake model server plays the judges (routed by each case's ``[case:<id>]`` tag).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conversations.recorded import EvalRun, RecordedTrial, recorded_trial, run_eval
from e2e.running import Backend, write_eval

from simulated.model_roles import JUDGE, ModelRoles, graded
from simulated.running import caller_profile, check_rows, score_and_threshold

BOOKED = "Your table for two is booked for Friday at 8pm."


def say(text: str) -> dict[str, str]:
    return {"request": f"SAY:{text}"}


# (case id, what the agent says, the case's assertions as source, extra case arguments)
CASES: list[tuple[str, str, str, str]] = [
    ("icontains-pass", BOOKED, 'assertion("icontains", "BOOKED FOR FRIDAY")', ""),
    ("icontains-fail", BOOKED, 'assertion("icontains", "cancelled")', ""),
    (
        "not-icontains-pass",
        BOOKED,
        'assertion("not-icontains", "[object Object]", metric="no-json-leak")',
        "",
    ),
    (
        "not-icontains-fail",
        "Booked: [OBJECT object]",
        'assertion("not-icontains", "[object Object]")',
        "",
    ),
    # Case-sensitive, as promptfoo's contains and not-contains are.
    ("contains-pass", BOOKED, 'assertion("contains", "Friday")', ""),
    ("contains-fail", BOOKED, 'assertion("contains", "friday")', ""),
    ("not-contains-pass", BOOKED, 'assertion("not-contains", "FRIDAY")', ""),
    ("not-contains-fail", BOOKED, 'assertion("not-contains", "Friday")', ""),
    ("contains-any-pass", BOOKED, 'assertion("contains-any", ["Thursday", "Friday"])', ""),
    ("contains-any-fail", BOOKED, 'assertion("contains-any", ["Monday", "Tuesday"])', ""),
    ("contains-all-pass", BOOKED, 'assertion("contains-all", ["Friday", "8pm"])', ""),
    ("contains-all-fail", BOOKED, 'assertion("contains-all", ["Friday", "9pm"])', ""),
    ("regex-pass", BOOKED, r'assertion("regex", r"\b\d{1,2}pm\b")', ""),
    ("regex-fail", BOOKED, r'assertion("regex", r"\b\d{1,2}am\b")', ""),
    ("not-regex-pass", BOOKED, r'assertion("not-regex", r"\b\d{1,2}am\b")', ""),
    ("not-regex-fail", BOOKED, r'assertion("not-regex", r"\b\d{1,2}pm\b")', ""),
    ("equals-pass", BOOKED, f'assertion("equals", {BOOKED!r})', ""),
    ("equals-fail", BOOKED, 'assertion("equals", "Booked.")', ""),
    ("is-json-pass", '{"booked": true, "time": "8pm"}', 'assertion("is-json")', ""),
    ("is-json-fail", BOOKED, 'assertion("is-json")', ""),
    (
        "rubric-pass",
        f"[case:rubric-pass] {BOOKED}",
        'assertion("llm-rubric", "The agent books the table.")',
        "",
    ),
    (
        "rubric-fail",
        f"[case:rubric-fail] {BOOKED}",
        'assertion("llm-rubric", "The agent asks for a phone number.")',
        "",
    ),
    ("python-bool-pass", BOOKED, 'assertion("python", mentions_friday)', ""),
    ("python-bool-fail", BOOKED, 'assertion("python", mentions_monday)', ""),
    ("python-score-pass", BOOKED, 'assertion("python", mostly_right)', ""),
    ("python-score-fail", BOOKED, 'assertion("python", mostly_wrong)', ""),
    ("python-verdict-pass", BOOKED, 'assertion("python", verdict_right)', ""),
    ("python-verdict-fail", BOOKED, 'assertion("python", verdict_wrong)', ""),
    ("python-raises", BOOKED, 'assertion("python", broken)', ""),
    ("python-returns-text", BOOKED, 'assertion("python", says_text)', ""),
    # Clamped, NaN was a passing score of 1; a Verdict's score past 1 passed as it was.
    ("python-returns-nan", BOOKED, 'assertion("python", not_a_number)', ""),
    ("python-verdict-past-one", BOOKED, 'assertion("python", verdict_past_one)', ""),
    # promptfoo's forms: code over (output, context), run in Node or natively.
    ("js-bool-pass", BOOKED, """assertion("javascript", "output.includes('Friday')")""", ""),
    (
        "js-number-below-threshold",
        BOOKED,
        'assertion("javascript", "output.length / 100", threshold=0.5)',
        "",
    ),
    ("js-number-above-zero", BOOKED, 'assertion("javascript", "0.3")', ""),
    (
        "js-grading-result",
        BOOKED,
        'assertion("javascript", "const n = output.length;\\nreturn {pass: n > 100, score: 0.25, reason: `only ${n} characters`};")',
        "",
    ),
    ("js-throws", BOOKED, 'assertion("javascript", "JSON.parse(output).booked")', ""),
    (
        "js-hangs",
        BOOKED,
        'assertion("javascript", "while (true) {}\\nreturn true;")',
        "check_timeout_ms=1500",
    ),
    ("py-inline-pass", BOOKED, """assertion("python", "'Friday' in output")""", ""),
    (
        "py-inline-body",
        BOOKED,
        """assertion("python", "hour = '9pm' in output\\nreturn {'pass': hour, 'score': 0.4, 'reason': 'no 9pm'}")""",
        "",
    ),
    ("py-inline-raises", BOOKED, 'assertion("python", "int(output)")', ""),
    ("starts-with-pass", BOOKED, 'assertion("starts-with", "Your table")', ""),
    ("not-starts-with-fail", BOOKED, 'assertion("not-starts-with", "Your")', ""),
    ("icontains-any-pass", BOOKED, 'assertion("icontains-any", ["MONDAY", "FRIDAY"])', ""),
    ("icontains-all-fail", BOOKED, 'assertion("icontains-all", ["FRIDAY", "9PM"])', ""),
    (
        "contains-json-pass",
        'Booked: {"time": "8pm"} (see you then)',
        'assertion("contains-json", {"type": "object", "required": ["time"]})',
        "",
    ),
    (
        "contains-json-fail",
        'Booked: {"day": "Friday"}',
        'assertion("contains-json", {"type": "object", "required": ["time"]})',
        "",
    ),
    # promptfoo's not- prefix on the types defined without one: the verdict inverted.
    ("not-equals-pass", BOOKED, 'assertion("not-equals", "Booked.")', ""),
    ("not-equals-fail", BOOKED, f'assertion("not-equals", {BOOKED!r})', ""),
    ("not-is-json-pass", BOOKED, 'assertion("not-is-json")', ""),
    ("not-is-json-fail", '{"booked": true}', 'assertion("not-is-json")', ""),
    (
        "not-contains-json-pass",
        'Booked: {"day": "Friday"}',
        'assertion("not-contains-json", {"type": "object", "required": ["time"]})',
        "",
    ),
    ("not-contains-any-fail", BOOKED, 'assertion("not-contains-any", ["Monday", "Friday"])', ""),
    ("not-contains-all-pass", BOOKED, 'assertion("not-contains-all", ["Friday", "9pm"])', ""),
    ("not-icontains-any-pass", BOOKED, 'assertion("not-icontains-any", ["MONDAY", "9PM"])', ""),
    ("not-icontains-all-fail", BOOKED, 'assertion("not-icontains-all", ["FRIDAY", "8PM"])', ""),
    ("not-js-bool", BOOKED, """assertion("not-javascript", "output.includes('Friday')")""", ""),
    # A number keeps its score: only the pass (at the threshold) is inverted.
    (
        "not-js-number-below-threshold",
        BOOKED,
        'assertion("not-javascript", "output.length / 100", threshold=0.5)',
        "",
    ),
    ("not-js-number-above-zero", BOOKED, 'assertion("not-javascript", "0.3")', ""),
    (
        "not-js-grading-result",
        BOOKED,
        'assertion("not-javascript", "const n = output.length;\\nreturn {pass: n > 100, score: 0.25, reason: `short`};")',
        "",
    ),
    ("not-js-throws", BOOKED, 'assertion("not-javascript", "JSON.parse(output).booked")', ""),
    (
        "not-py-inline-body",
        BOOKED,
        """assertion("not-python", "hour = '9pm' in output\\nreturn {'pass': hour, 'score': 0.4, 'reason': 'no 9pm'}")""",
        "",
    ),
    (
        "not-python-config",
        BOOKED,
        """assertion("not-python", "context['config']['day'] in output", config={"day": "Monday"})""",
        "",
    ),
    (
        "js-config",
        BOOKED,
        'assertion("javascript", "output.includes(context.config.day)", config={"day": "Friday"})',
        "",
    ),
    (
        "not-rubric-pass",
        f"[case:not-rubric-pass] {BOOKED}",
        'assertion("not-llm-rubric", "The agent asks for a phone number.")',
        "",
    ),
    (
        "not-rubric-fail",
        f"[case:not-rubric-fail] {BOOKED}",
        'assertion("not-llm-rubric", "The agent books the table.")',
        "",
    ),
    (
        "rubric-prompt",
        f"[case:rubric-prompt] {BOOKED}",
        'assertion("llm-rubric", "Books the table", rubric_prompt=GRADING_PROMPT)',
        "",
    ),
    ("latency-pass", BOOKED, 'assertion("latency", 600000)', ""),
    ("latency-fail", BOOKED, 'assertion("latency", 0)', ""),
    ("turn-count-pass", BOOKED, 'assertion("turn-count", 1)', ""),
    ("turn-count-fail", BOOKED, 'assertion("turn-count", 0)', ""),
    ("cost-unknown", BOOKED, 'assertion("cost", 1.0)', ""),
    # Several assertions, and the case's threshold.
    (
        "information-only",
        BOOKED,
        'assertion("icontains", "friday"), assertion("icontains", "cancelled", weight=0, metric="tone")',
        "",
    ),
    ("only-information", BOOKED, 'assertion("icontains", "cancelled", weight=0)', ""),
    (
        "threshold-reached",
        BOOKED,
        'assertion("icontains", "friday", weight=3), assertion("icontains", "cancelled", weight=1)',
        "threshold=0.6",
    ),
    (
        "threshold-exact",
        BOOKED,
        'assertion("icontains", "friday", weight=3), assertion("icontains", "cancelled", weight=1)',
        "threshold=0.75",
    ),
    (
        "threshold-missed",
        BOOKED,
        'assertion("icontains", "friday", weight=3), assertion("icontains", "cancelled", weight=1)',
        "threshold=0.8",
    ),
    (
        "no-threshold",
        BOOKED,
        'assertion("icontains", "friday", weight=3), assertion("icontains", "cancelled", weight=1)',
        "",
    ),
    (
        "validator-still-decides",
        BOOKED,
        'wrote_the_booking, assertion("icontains", "friday")',
        "threshold=0.5",
    ),
    (
        "two-turns",
        "First answer mentions Friday.",
        'assertion("icontains", "friday"), assertion("equals", "Second answer."), assertion("turn-count", 2)',
        'user=turns("SAY:Second answer.")',
    ),
]
PRICED_CASES: list[tuple[str, str, str, str]] = [
    ("cost-pass", BOOKED, 'assertion("cost", 0.01)', ""),
    ("cost-fail", BOOKED, 'assertion("cost", 0.001)', ""),
]

FUNCTIONS = """
def mentions_friday(ctx):
    return "Friday" in ctx.answer()


def mentions_monday(ctx):
    return "Monday" in ctx.transcript()


def mostly_right(ctx):
    return 0.8


def mostly_wrong(ctx):
    return 0.2


def verdict_right(ctx):
    return Verdict(True, "the time is given", score=0.9)


def verdict_wrong(ctx):
    return Verdict(False, "no phone number asked", score=0.3)


def broken(ctx):
    raise ValueError("the booking API is down")


def says_text(ctx):
    return "yes"


def not_a_number(ctx):
    return float("nan")


def verdict_past_one(ctx):
    return Verdict(True, "great", score=1.5)


import json

GRADING_PROMPT = json.dumps([
    {"role": "system", "content": 'Reply with JSON: {"passed": true or false, "score": 0 to 1}'},
    {"role": "user", "content": "Output: {{output}}\\nRubric: {{rubric}}\\nAsked: {{request}}"},
])


def wrote_the_booking(ctx):
    return Verdict(False, "no booking.txt in the workspace")
"""


def _case_source(case_id: str, said: str, assertions: str, extra: str) -> str:
    more = f", {extra}" if extra else ""
    return f"        case({case_id!r}, variables={say(said)!r}, validate=[{assertions}]{more}),\n"


def graded_eval() -> str:
    return (
        "from proctor import Verdict, assertion, case, profile, suite, turns, variant\n\n"
        f"caller = {caller_profile()}\n"
        f"{FUNCTIONS}\n\n"
        'graded = suite("graded", prompt="{{request}}", cases=[\n'
        + "".join(_case_source(*case) for case in CASES)
        + '], variants=[variant("command", profile=caller)])\n\n'
        'priced = suite("priced", prompt="{{request}}", cases=[\n'
        + "".join(_case_source(*case) for case in PRICED_CASES)
        + '], variants=[variant("command", profile=caller, name="priced",\n'
        '                       prices={"input_per_mtok": 1.0, "output_per_mtok": 10.0})])\n'
    )


@pytest.fixture(scope="module")
def shared(module_sqlite: Backend, module_roles: ModelRoles, tmp_path_factory) -> EvalRun:
    module_roles.judge("[case:rubric-pass]", graded(True, 0.9, "the table is booked"))
    module_roles.judge("[case:rubric-fail]", graded(False, 0.1, "no phone number was asked for"))
    module_roles.judge("[case:not-rubric-pass]", graded(False, 0.1, "no phone number asked"))
    module_roles.judge("[case:not-rubric-fail]", graded(True, 0.8, "the table is booked"))
    module_roles.judge("[case:rubric-prompt]", graded(True, 0.7, "booked, by the custom prompt"))
    folder = tmp_path_factory.mktemp("assertion-evals")
    (folder / "graded.eval.py").write_text(graded_eval(), encoding="utf-8")
    return run_eval(module_sqlite, folder)


def trial_of(shared: EvalRun, backend: Backend, case: str) -> RecordedTrial:
    return recorded_trial(backend, shared.batch, case)


def only_check(trial: RecordedTrial) -> dict[str, Any]:
    [check] = check_rows(trial)
    assert check["kind"] == "assertion"
    return check


# (case, trial status, the check's score, a fragment of its message)
ONE_ASSERTION = [
    ("icontains-pass", "passed", 1.0, "said 'BOOKED FOR FRIDAY'"),
    ("icontains-fail", "failed", 0.0, "never said 'cancelled'"),
    ("not-icontains-pass", "passed", 1.0, "never said"),
    ("not-icontains-fail", "failed", 0.0, "said '[object Object]'"),
    ("contains-pass", "passed", 1.0, "the agent said 'Friday'"),
    ("contains-fail", "failed", 0.0, "the agent never said 'friday'"),
    ("not-contains-pass", "passed", 1.0, "the agent never said 'FRIDAY'"),
    ("not-contains-fail", "failed", 0.0, "the agent said 'Friday'"),
    ("contains-any-pass", "passed", 1.0, "found ['Friday']"),
    ("contains-any-fail", "failed", 0.0, "none of ['Monday', 'Tuesday'] found"),
    ("contains-all-pass", "passed", 1.0, "all found"),
    ("contains-all-fail", "failed", 0.0, "missing ['9pm']"),
    ("regex-pass", "passed", 1.0, "matched '8pm'"),
    ("regex-fail", "failed", 0.0, "no match"),
    ("not-regex-pass", "passed", 1.0, "no match"),
    ("not-regex-fail", "failed", 0.0, "matched '8pm'"),
    ("equals-pass", "passed", 1.0, "equals"),
    ("equals-fail", "failed", 0.0, "differs"),
    ("is-json-pass", "passed", 1.0, "is JSON"),
    ("is-json-fail", "failed", 0.0, "not JSON"),
    ("rubric-pass", "passed", 0.9, "the table is booked"),
    ("rubric-fail", "failed", 0.1, "no phone number was asked for"),
    ("python-bool-pass", "passed", 1.0, ""),
    ("python-bool-fail", "failed", 0.0, ""),
    ("python-score-pass", "passed", 0.8, "score 0.8"),
    ("python-score-fail", "failed", 0.2, "score 0.2"),
    ("python-verdict-pass", "passed", 0.9, "the time is given"),
    ("python-verdict-fail", "failed", 0.3, "no phone number asked"),
    ("python-raises", "failed", 0.0, "ValueError: the booking API is down"),
    ("python-returns-text", "failed", 0.0, "returned str"),
    ("python-returns-nan", "failed", 0.0, "returned nan; a score is a number from 0 to 1"),
    ("python-verdict-past-one", "failed", 0.0, "whose score is 1.5; a score is 0 to 1"),
    ("js-bool-pass", "passed", 1.0, "Assertion passed"),
    ("js-number-below-threshold", "failed", 0.47, "JavaScript returned 0.47 (threshold 0.5)"),
    ("js-number-above-zero", "passed", 0.3, "JavaScript returned 0.3"),
    ("js-grading-result", "failed", 0.25, "only 47 characters"),
    ("js-throws", "failed", 0.0, "the JavaScript threw: SyntaxError"),
    ("js-hangs", "failed", 0.0, "the JavaScript did not finish within 1.5 s"),
    ("py-inline-pass", "passed", 1.0, "Assertion passed"),
    ("py-inline-body", "failed", 0.4, "no 9pm"),
    ("py-inline-raises", "failed", 0.0, "the Python raised ValueError"),
    ("starts-with-pass", "passed", 1.0, "starts with 'Your table'"),
    ("not-starts-with-fail", "failed", 0.0, "starts with 'Your'"),
    ("icontains-any-pass", "passed", 1.0, "found ['FRIDAY']"),
    ("icontains-all-fail", "failed", 0.0, "missing ['9PM']"),
    ("contains-json-pass", "passed", 1.0, "matching the schema"),
    ("contains-json-fail", "failed", 0.0, "'time' is a required property"),
    ("not-equals-pass", "passed", 1.0, "the final answer differs (not-equals passes)"),
    ("not-equals-fail", "failed", 0.0, "equals the value (not-equals fails)"),
    ("not-is-json-pass", "passed", 1.0, "not JSON"),
    ("not-is-json-fail", "failed", 0.0, "(not-is-json fails)"),
    ("not-contains-json-pass", "passed", 1.0, "none matching the schema"),
    ("not-contains-any-fail", "failed", 0.0, "found ['Friday']"),
    ("not-contains-all-pass", "passed", 1.0, "missing ['9pm']"),
    ("not-icontains-any-pass", "passed", 1.0, "none of"),
    ("not-icontains-all-fail", "failed", 0.0, "all found"),
    ("not-js-bool", "failed", 0.0, "JavaScript returned true"),
    ("not-js-number-below-threshold", "passed", 0.47, "JavaScript returned 0.47"),
    ("not-js-number-above-zero", "failed", 0.3, "JavaScript returned 0.3"),
    ("not-js-grading-result", "passed", 0.25, "Assertion passed"),
    # Code that breaks fails either way, as in promptfoo.
    ("not-js-throws", "failed", 0.0, "the JavaScript threw"),
    ("not-py-inline-body", "passed", 0.4, "Assertion passed"),
    ("not-python-config", "passed", 1.0, "Assertion passed"),
    ("js-config", "passed", 1.0, "Assertion passed"),
    # llm-rubric's score becomes 1 - the grader's.
    ("not-rubric-pass", "passed", 0.9, "no phone number asked"),
    ("not-rubric-fail", "failed", 0.2, "the table is booked"),
    ("rubric-prompt", "passed", 0.7, "booked, by the custom prompt"),
    ("latency-pass", "passed", 1.0, "(at most 600000)"),
    ("latency-fail", "failed", 0.0, "(at most 0)"),
    ("turn-count-pass", "passed", 1.0, "1 turns (at most 1)"),
    ("turn-count-fail", "failed", 0.0, "1 turns (at most 0)"),
    ("cost-unknown", "failed", 0.0, "no cost known"),
    ("cost-pass", "passed", 1.0, "cost $0.0020 (at most $0.01)"),
    ("cost-fail", "failed", 0.0, "cost $0.0020 (at most $0.001)"),
]


@pytest.mark.parametrize(
    ("case", "status", "score", "message"), ONE_ASSERTION, ids=[c[0] for c in ONE_ASSERTION]
)
def test_each_assertion_type_passes_and_fails_with_its_score_and_reason(
    shared: EvalRun, module_sqlite: Backend, case: str, status: str, score: float, message: str
) -> None:
    trial = trial_of(shared, module_sqlite, case)
    check = only_check(trial)

    assert trial.row["status"] == status, check
    assert check["passed"] is (status == "passed")
    assert check["score"] == pytest.approx(score)
    assert check["weight"] == 1.0
    assert message in check["message"]
    # One assertion: the trial's weighted score is its score; no threshold was set.
    assert score_and_threshold(trial) == (pytest.approx(score), None)


def test_a_rubric_prompt_is_what_the_grader_is_sent_filled_with_output_rubric_and_vars(
    shared: EvalRun, module_roles: ModelRoles
) -> None:
    [body] = module_roles.sent(JUDGE, "[case:rubric-prompt]")
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][1]["content"] == (
        f"Output: [case:rubric-prompt] {BOOKED}\nRubric: Books the table\n"
        f"Asked: SAY:[case:rubric-prompt] {BOOKED}"
    )


def test_an_assertions_metric_is_its_own_name_or_its_type(
    shared: EvalRun, module_sqlite: Backend
) -> None:
    assert (
        only_check(trial_of(shared, module_sqlite, "not-icontains-pass"))["metric"]
        == "no-json-leak"
    )
    assert only_check(trial_of(shared, module_sqlite, "regex-pass"))["metric"] == "regex"
    assert only_check(trial_of(shared, module_sqlite, "python-bool-pass"))["metric"] == "python"
    assert (
        only_check(trial_of(shared, module_sqlite, "python-bool-pass"))["name"] == "mentions_friday"
    )


def test_a_rubric_is_graded_by_the_judge_shown_the_conversation(
    shared: EvalRun, module_sqlite: Backend, module_roles: ModelRoles
) -> None:
    trial = trial_of(shared, module_sqlite, "rubric-fail")

    [consultation] = trial.consultations("judge")
    assert consultation["verdict"] == "failed"
    assert consultation["reason"] == "no phone number was asked for"
    [sent] = module_roles.sent(JUDGE, "[case:rubric-fail]")
    shown = "\n".join(m["content"] for m in sent["messages"])
    assert "The agent asks for a phone number." in shown and BOOKED in shown
    assert trial.has_artifact("judges/check-1/prompt.json")


def test_a_failing_weight_zero_assertion_is_information_only(
    shared: EvalRun, module_sqlite: Backend
) -> None:
    trial = trial_of(shared, module_sqlite, "information-only")

    assert trial.row["status"] == "passed"
    assert [(c["passed"], c["weight"], c["metric"]) for c in check_rows(trial)] == [
        (True, 1.0, "icontains"),
        (False, 0.0, "tone"),
    ]
    assert score_and_threshold(trial) == (1.0, None)


def test_a_case_with_only_information_assertions_is_not_failed_by_them(
    shared: EvalRun, module_sqlite: Backend
) -> None:
    trial = trial_of(shared, module_sqlite, "only-information")

    assert only_check(trial)["weight"] == 0.0
    assert trial.row["status"] == "passed"


@pytest.mark.parametrize(
    ("case", "status", "threshold"),
    [
        ("threshold-reached", "passed", 0.6),
        ("threshold-exact", "passed", 0.75),
        ("threshold-missed", "failed", 0.8),
        ("no-threshold", "failed", None),
    ],
)
def test_the_weighted_score_against_the_threshold_decides_the_trial(
    shared: EvalRun, module_sqlite: Backend, case: str, status: str, threshold: float | None
) -> None:
    trial = trial_of(shared, module_sqlite, case)

    assert trial.row["status"] == status
    # 3 of 4 weighted points: stored exactly, with the threshold the trial was held to.
    assert score_and_threshold(trial) == (0.75, threshold)
    assert [(c["passed"], c["weight"], c["score"]) for c in check_rows(trial)] == [
        (True, 3.0, 1.0),
        (False, 1.0, 0.0),
    ]


def test_a_failing_validator_fails_the_trial_whatever_the_assertions_score(
    shared: EvalRun, module_sqlite: Backend
) -> None:
    trial = trial_of(shared, module_sqlite, "validator-still-decides")

    assert trial.row["status"] == "failed"
    assert [(c["kind"], c["passed"]) for c in check_rows(trial)] == [
        ("validator", False),
        ("assertion", True),
    ]
    assert score_and_threshold(trial) == (1.0, 0.5)


def test_text_assertions_read_the_whole_conversation_and_equals_reads_the_final_answer(
    shared: EvalRun, module_sqlite: Backend
) -> None:
    trial = trial_of(shared, module_sqlite, "two-turns")

    assert trial.user_messages == ["SAY:First answer mentions Friday.", "SAY:Second answer."]
    assert [(c["metric"], c["passed"]) for c in check_rows(trial)] == [
        ("icontains", True),
        ("equals", True),
        ("turn-count", True),
    ]
    assert trial.row["status"] == "passed"


# --- refused when the file loads ------------------------------------------------------------------


def test_broken_assertions_and_thresholds_are_refused_before_anything_runs(tmp_path: Path) -> None:
    from conftest import proctor_env

    backend = Backend("sqlite", proctor_env(tmp_path / "home"))
    write_eval(
        tmp_path / "evals",
        "broken.eval.py",
        f"""
    from proctor import assertion, case, profile, suite, variant

    caller = {caller_profile()}

    broken = suite("broken", prompt="hello", cases=[
        case("unknown-type", validate=[assertion("contains-exactly", "x")]),
        case("negative-weight", validate=[assertion("icontains", "x", weight=-1)]),
        case("bad-regex", validate=[assertion("regex", "([unclosed")]),
        case("threshold-too-high", validate=[assertion("icontains", "x")], threshold=1.5),
        case("python-not-callable", validate=[assertion("python", 42)]),
        case("latency-not-a-number", validate=[assertion("latency", "fast")]),
        case("negative-cost", validate=[assertion("cost", -0.5)]),
        case("blank-rubric", validate=[assertion("llm-rubric", " ")]),
        case("metric-not-text", validate=[assertion("icontains", "x", metric=5)]),
        case("list-not-of-text", validate=[assertion("contains-any", ["x", 5])]),
        case("not-latency", validate=[assertion("not-latency", 100)]),
        case("prompt-not-graded", validate=[assertion("icontains", "x", rubric_prompt="{{output}}")]),
    ], variants=[variant("command", profile=caller)])
    """,
    )

    result = backend.eval(tmp_path / "evals")

    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 12, lines
    by_case = {
        case: next(line for line in lines if f"case {case}:" in line)
        for case in (
            "unknown-type",
            "negative-weight",
            "bad-regex",
            "threshold-too-high",
            "python-not-callable",
            "latency-not-a-number",
            "negative-cost",
            "blank-rubric",
            "metric-not-text",
            "list-not-of-text",
            "not-latency",
            "prompt-not-graded",
        )
    }
    assert "unknown type 'contains-exactly'" in by_case["unknown-type"]
    assert "weight" in by_case["negative-weight"]
    assert "not a valid regex" in by_case["bad-regex"]
    assert "threshold must be a number from 0 to 1" in by_case["threshold-too-high"]
    assert "function" in by_case["python-not-callable"]
    assert "number" in by_case["latency-not-a-number"]
    # A bound below 0 fails every trial; a blank rubric passes every one; a metric that is
    # no text errored every trial.
    assert "0 or more" in by_case["negative-cost"] and "-0.5" in by_case["negative-cost"]
    assert "the rubric the model grades by, and it is blank" in by_case["blank-rubric"]
    assert "metric must be text" in by_case["metric-not-text"]
    assert "list of strings" in by_case["list-not-of-text"]
    assert "unknown type 'not-latency'" in by_case["not-latency"]
    assert (
        "rubric_prompt is for llm-rubric and model-graded-closedqa only"
        in (by_case["prompt-not-graded"])
    )
    assert not backend.exists() or backend.scalar("SELECT COUNT(*) FROM evals_app_trial") == 0


def test_an_infinite_weight_is_refused_before_anything_runs(tmp_path: Path) -> None:
    from conftest import proctor_env

    backend = Backend("sqlite", proctor_env(tmp_path / "home"))
    write_eval(
        tmp_path / "evals",
        "infinite.eval.py",
        f"""
    from proctor import assertion, case, profile, suite, variant

    caller = {caller_profile()}

    infinite = suite("infinite", prompt="SAY:hello", cases=[
        case("infinite-weight", validate=[assertion("icontains", "hello", weight=float("inf"))]),
    ], variants=[variant("command", profile=caller)])
    """,
    )

    result = backend.eval(tmp_path / "evals")

    assert result.returncode == 2, result.stderr
    assert "case infinite-weight:" in result.stderr and "weight" in result.stderr


def test_the_json_report_carries_the_weighted_score_and_each_metric(tmp_path: Path) -> None:
    from conftest import proctor_env

    backend = Backend("sqlite", proctor_env(tmp_path / "home"))
    write_eval(
        tmp_path / "evals",
        "scored.eval.py",
        f"""
    from proctor import assertion, case, profile, suite, variant

    caller = {caller_profile()}

    scored = suite("scored", prompt="SAY:{BOOKED}", cases=[
        case("scored", threshold=0.6, validate=[
            assertion("icontains", "friday", weight=3, metric="disposition"),
            assertion("icontains", "cancelled", weight=1, metric="tone"),
        ]),
    ], variants=[variant("command", profile=caller)])
    """,
    )

    report = backend.eval_json(tmp_path / "evals")

    [trial] = report["runs"][0]["trials"]
    assert (trial["status"], trial["score"], trial["threshold"]) == ("passed", 0.75, 0.6)
    assert [(c["metric"], c["weight"], c["score"]) for c in trial["checks"]] == [
        ("disposition", 3.0, 1.0),
        ("tone", 1.0, 0.0),
    ]
