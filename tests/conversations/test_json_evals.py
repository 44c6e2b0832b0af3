"""The reference's three JSON examples (the responder, scripted turns, plan mode), written as
`*.eval.json` files exactly as printed, run through `proctor eval` against a model endpoint
given in settings; they are versioned like Python evals.

The responder and plan-mode examples share the id add-request-caching, and a case id is unique
within an organization: here the plan-mode example is the same case's next version (the same
file name, so the same suite), run as a second batch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e.running import Backend
from fakes.openai_server import FakeModelServer

from conversations.model_script import RESPONDER, ModelScript, done, graded
from conversations.recorded import AGENTS, RecordedTrial, recorded_trial, run_eval

RESPONDER_EXAMPLE = """\
{
  "id": "add-request-caching",
  "prompt": "Requests to the pricing API are slow. Can you add caching?",
  "expected_output": "A working cache with the pricing endpoint under 100ms.",
  "responder": { "type": "llm", "max_turns": 8 }
}
"""

SCRIPTED_EXAMPLE = """\
{
  "id": "clarify-before-editing",
  "prompt": "The due date is wrong. Fix it.",
  "expected_output": "Asks which timezone before editing.",
  "turns": [
    {
      "prompt": "The affected users are all in US timezones.",
      "deliver_when": "agent_asks",
      "agent_response_matches": "(?i)time ?zone"
    },
    { "prompt": "It is a date-only field.", "deliver_when": "always" }
  ]
}
"""

PLAN_MODE_EXAMPLE = """\
{
  "id": "add-request-caching",
  "prompt": "Requests to the pricing API are slow. Can you add caching?",
  "expected_output": "A working cache with the pricing endpoint under 100ms.",
  "plan_mode": true,
  "responder": { "type": "llm" }
}
"""

PRICING = "pricing API"
DUE_DATE = "due date is wrong"
APPROVAL = "The plan is approved. Implement it now."


def write_variants(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "variants.json").write_text(
        json.dumps(
            [
                {
                    "harness": "command",
                    "name": "talker",
                    "profile": {
                        "name": "talker",
                        "dir": str(AGENTS),
                        "run": 'python3 "$PROCTOR_PROFILE_DIR/talker.py"',
                        "capabilities": ["conversation-resume", "plan-mode"],
                        "plan_file": "plans/plan.md",
                    },
                }
            ],
            indent=2,
        )
    )


def version_count(backend: Backend) -> int:
    return backend.scalar("SELECT COUNT(*) FROM evals_app_caseversion")


def case_version_of(trial: RecordedTrial) -> int:
    return trial.backend.scalar(
        "SELECT v.number FROM evals_app_trial t JOIN evals_app_run r ON t.run_id = r.id "
        "JOIN evals_app_caseversion v ON r.case_version_id = v.id WHERE t.id = ?",
        trial.row["id"],
    )


@pytest.fixture(scope="module")
def examples(module_sqlite: Backend, module_server: FakeModelServer, tmp_path_factory) -> dict:
    """Run the responder and scripted examples, run them again unchanged, then the plan-mode
    example as the next version of add-request-caching."""
    script = ModelScript().install(module_server)
    first = tmp_path_factory.mktemp("examples")
    write_variants(first)
    (first / "caching.eval.json").write_text(RESPONDER_EXAMPLE)
    (first / "clarify.eval.json").write_text(SCRIPTED_EXAMPLE)
    runs = {}
    for name in ("first", "again"):
        script.responder(PRICING, done("the agent reports the cache added"))
        script.judge(PRICING, graded(True, 0.9, "a cache was added"))
        script.judge(DUE_DATE, graded(True, 0.8, "it asked about the time zone first"))
        versions_before = version_count(module_sqlite) if name == "again" else 0
        runs[name] = (run_eval(module_sqlite, first), versions_before, version_count(module_sqlite))
    planned = tmp_path_factory.mktemp("plan-mode")
    write_variants(planned)
    (planned / "caching.eval.json").write_text(PLAN_MODE_EXAMPLE)
    script.responder(PRICING, done("the agent presented a plan"), done("the cache is in place"))
    script.judge(PRICING, graded(True, 0.9, "the plan was implemented"))
    runs["plan"] = (run_eval(module_sqlite, planned), None, version_count(module_sqlite))
    return {"runs": runs, "script": script}


def example_trial(backend: Backend, examples: dict, run: str, case_id: str) -> RecordedTrial:
    return recorded_trial(backend, examples["runs"][run][0].batch, case_id)


def test_the_responder_example_completes_when_the_responder_says_done(
    module_sqlite, examples
) -> None:
    trial = example_trial(module_sqlite, examples, "first", "add-request-caching")

    assert trial.row["status"] == "passed"
    assert trial.row["conversation_outcome"] == "completed"
    assert trial.user_messages == ["Requests to the pricing API are slow. Can you add caching?"]
    assert [c["verdict"] for c in trial.consultations("responder")] == ["done"]
    # With no checks of its own, it is graded by a judge built from expected_output...
    (check,) = trial.checks()
    assert (check["kind"], bool(check["passed"])) == ("judge", True)
    assert "under 100ms" in json.dumps(trial.consultations("judge")[0]["prompt"])
    # ...which the responder never sees.
    for body in examples["script"].sent(RESPONDER, PRICING):
        assert "under 100ms" not in json.dumps(body)


def test_the_scripted_example_delivers_both_turns_to_an_agent_that_asks_about_the_time_zone(
    module_sqlite, examples
) -> None:
    trial = example_trial(module_sqlite, examples, "first", "clarify-before-editing")

    assert trial.row["status"] == "passed"
    assert trial.row["conversation_outcome"] == "completed"
    assert trial.user_messages == [
        "The due date is wrong. Fix it.",
        "The affected users are all in US timezones.",
        "It is a date-only field.",
    ]
    assert [turn["origin"] for turn in trial.turns] == [{}, {}, {}]
    assert trial.consultations("responder") == []


def test_json_examples_are_versioned_like_python_evals(module_sqlite, examples) -> None:
    first, _, after_first = examples["runs"]["first"]
    again, before_again, after_again = examples["runs"]["again"]

    assert "2 new case versions" in first.result.stderr
    assert after_first == 2
    assert after_again == before_again == 2
    assert "new case version" not in again.result.stderr
    trial = example_trial(module_sqlite, examples, "again", "add-request-caching")
    assert case_version_of(trial) == 1


def test_the_plan_mode_example_is_planned_approved_and_implemented(module_sqlite, examples) -> None:
    plan_run, _, versions = examples["runs"]["plan"]
    trial = example_trial(module_sqlite, examples, "plan", "add-request-caching")

    assert "1 new case version" in plan_run.result.stderr and versions == 3
    assert case_version_of(trial) == 2
    assert trial.row["status"] == "passed"
    assert trial.row["conversation_outcome"] == "completed"
    assert trial.user_messages[1:] == [APPROVAL]
    assert [turn["mode"] for turn in trial.turns] == ["plan", "act"]
    assert trial.conversation["plan"]["signal"] == "responder"
    assert trial.artifact("outputs/plan.md").startswith("# Plan")
    assert "cache.py" in trial.artifact("workspace.diff")
    # The judge reads the plan in a section of its own.
    assert "<plan>" in json.dumps(trial.consultations("judge")[0]["prompt"])


def test_the_three_examples_side_by_side_in_one_folder(
    sqlite_home: Backend, fake_model_server: FakeModelServer, tmp_path: Path
) -> None:
    folder = tmp_path / "examples"
    write_variants(folder)
    (folder / "responder.eval.json").write_text(RESPONDER_EXAMPLE)
    (folder / "scripted.eval.json").write_text(SCRIPTED_EXAMPLE)
    (folder / "plan-mode.eval.json").write_text(PLAN_MODE_EXAMPLE)

    result = sqlite_home.eval(folder)

    # Two of them share a case id, which the organization-wide rule refuses in one clear line.
    assert result.returncode == 2
    message = " ".join(result.stderr.split())
    assert "add-request-caching" in message and "already used" in message
    assert "Traceback" not in result.stderr
    assert fake_model_server.requests == []
    assert sqlite_home.counts() == {}
