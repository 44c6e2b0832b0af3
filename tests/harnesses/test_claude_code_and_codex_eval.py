"""Claude Code and Codex end to end through `proctor eval`: one suite with a variant per agent,
each pointed at its fake model API in its profile, graded by a command check; a follow-up turn
that resumes the agent's own session; a plan-mode case on Claude Code whose plan file becomes
outputs/plan.md before the approval turn."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from e2e.running import Backend, only_run, trial_folder, write_eval
from fakes.anthropic_api import FakeAnthropicServer, tool_use, write_plan_where_told
from fakes.openai_responses import FakeResponsesServer, shell

from harnesses.agent_cli_runs import require_cli
from runner.conversation.driver import PLAN_APPROVAL

WORKER_KEY = "anthropic-key-held-by-the-worker"

EVAL = """
from proctor import case, command, profile, suite, turns, variant

claude = variant("claude-code", model="claude-fake-1", name="claude", profile=profile("claude", env={{
    "ANTHROPIC_BASE_URL": {anthropic!r}, "ANTHROPIC_API_KEY": "$PROCTOR_E2E_ANTHROPIC_KEY", "PATH": {claude_path!r}}}))
codex = variant("codex", model="gpt-fake-codex", name="codex", profile=profile("codex", env={{
    "OPENAI_BASE_URL": {openai!r}, "OPENAI_API_KEY": "test-key", "PATH": {codex_path!r}}}))

agents = suite(
    "agents",
    prompt="[case:{{{{case}}}}] {{{{task}}}}",
    cases=[
        case("hello", variables={{"case": "hello", "task": "Create hello.txt containing hi."}},
             validate=command("grep -qx hi hello.txt")),
        case("follow-up", variables={{"case": "follow-up", "task": "Create hello.txt containing hi."}},
             user=turns("Now append a line saying bye."), validate=command("grep -qx hi hello.txt && grep -qx bye hello.txt")),
    ],
    variants=[claude, codex],
)

plans = suite(
    "plans",
    prompt="[case:plan] Create hello.txt containing hi.",
    cases=[case("plan", plan_mode=True, validate=command("grep -qx hi hello.txt"))],
    variants=[claude],
)
"""

PLAN = "# Plan\n\n1. Create hello.txt.\n"


class ByCase:
    """A scripted reply that answers each case from its own queue, found by the case's marker
    in the conversation, so trials may run in any order."""

    def __init__(self, queues: dict[str, list[Any]]) -> None:
        self.queues = queues

    @property
    def size(self) -> int:
        return sum(len(queue) for queue in self.queues.values())

    def __call__(self, body: Any) -> Any:
        text = json.dumps(body)
        for marker, queue in self.queues.items():
            if f"[case:{marker}]" in text:
                return queue.pop(0)
        raise AssertionError("a model call from no known case")


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[FakeAnthropicServer, FakeResponsesServer]]:
    with FakeAnthropicServer() as anthropic, FakeResponsesServer() as openai:
        yield anthropic, openai


@pytest.fixture(scope="module")
def batch(servers, tmp_path_factory) -> tuple[Backend, dict[str, Any]]:
    from conftest import proctor_env

    anthropic, openai = servers
    claude_path, codex_path = require_cli("claude"), require_cli("codex")
    claude_script = ByCase(
        {
            "hello": [tool_use("Bash", {"command": "echo hi > hello.txt"}), "Created hello.txt."],
            "follow-up": [
                tool_use("Bash", {"command": "echo hi > hello.txt"}),
                "Created hello.txt.",
                tool_use("Bash", {"command": "echo bye >> hello.txt"}),
                "Appended bye.",
            ],
            "plan": [
                write_plan_where_told(PLAN),
                "My plan is ready.",
                tool_use("Bash", {"command": "echo hi > hello.txt"}),
                "Implemented the plan.",
            ],
        }
    )
    codex_script = ByCase(
        {
            "hello": [shell("echo hi > hello.txt"), "Created hello.txt."],
            "follow-up": [
                shell("echo hi > hello.txt"),
                "Created hello.txt.",
                shell("echo bye >> hello.txt"),
                "Appended bye.",
            ],
        }
    )
    anthropic.script(*[claude_script] * claude_script.size)
    openai.script(*[codex_script] * codex_script.size)
    project = tmp_path_factory.mktemp("project")
    write_eval(
        project,
        "agents.eval.py",
        EVAL.format(
            anthropic=anthropic.root_url,
            openai=openai.url,
            claude_path=claude_path,
            codex_path=codex_path,
        ),
    )
    backend = Backend(
        "sqlite",
        proctor_env(tmp_path_factory.mktemp("proctor-home"), PROCTOR_E2E_ANTHROPIC_KEY=WORKER_KEY),
    )
    report = backend.eval_json(project, "-j", "2")
    return backend, report


def run_of(report: dict[str, Any], case: str, variant: str) -> dict[str, Any]:
    return only_run({"runs": [r for r in report["runs"] if r["variant"] == variant]}, case)


def trial_id(backend: Backend, report: dict[str, Any], case: str, variant: str) -> int:
    ids = backend.rows(
        "SELECT t.id FROM evals_app_trial t JOIN evals_app_run r ON t.run_id = r.id "
        "JOIN evals_app_variant v ON r.variant_id = v.id JOIN evals_app_caseversion cv ON r.case_version_id = cv.id "
        "JOIN evals_app_case c ON cv.case_id = c.id WHERE r.batch_id = ? AND c.slug = ? AND v.name = ?",
        report["batch"],
        case,
        variant,
    )
    assert len(ids) == 1
    return ids[0][0]


@pytest.mark.parametrize("variant", ["claude", "codex"])
def test_each_agents_transcript_is_recorded_and_its_check_graded(batch, variant):
    backend, report = batch
    trial = run_of(report, "hello", variant)["trials"][0]
    events = backend.events(trial_id(backend, report, "hello", variant))

    assert trial["status"] == "passed", trial
    assert trial["checks"][0]["passed"] and trial["checks"][0]["kind"] == "command"
    assert trial["answer"] == "Created hello.txt."
    assert trial["usage"]["input_tokens"] > 0 and trial["usage"]["output_tokens"] > 0
    assert [(d["command"], d["exit_code"]) for kind, d in events if kind == "Command"] == [
        ("echo hi > hello.txt", 0)
    ]
    kinds = [kind for kind, _ in events if kind != "Log"]  # Log: the harness set-up's notes
    assert kinds[0] == "Started" and kinds[-1] == "Finished" and "Usage" in kinds


@pytest.mark.parametrize("variant", ["claude", "codex"])
def test_a_follow_up_turn_resumes_the_agents_own_session(batch, variant):
    backend, report = batch
    trial = run_of(report, "follow-up", variant)["trials"][0]
    tid = trial_id(backend, report, "follow-up", variant)
    started = [(d["session_id"]) for kind, d in backend.events(tid) if kind == "Started"]
    turn_tokens = backend.rows(
        'SELECT input_tokens FROM evals_app_turn WHERE trial_id = ? ORDER BY "index"', tid
    )

    assert trial["status"] == "passed", trial
    assert len(started) == 2 and started[0] == started[1]
    assert backend.scalar("SELECT session_id FROM evals_app_trial WHERE id = ?", tid) == started[0]
    # Each turn made two model calls and is charged for those only (Codex reports the thread's
    # running total; the second turn is not charged for the first one's calls again).
    assert turn_tokens[0] == turn_tokens[1]


def test_a_plan_mode_case_keeps_the_plan_file_and_the_approval_turn(batch):
    backend, report = batch
    trial = run_of(report, "plan", "claude")["trials"][0]
    tid = trial_id(backend, report, "plan", "claude")
    turns = backend.rows(
        'SELECT mode, prompt FROM evals_app_turn WHERE trial_id = ? ORDER BY "index"', tid
    )

    assert trial["status"] == "passed", trial
    assert (trial_folder(backend, report["batch"], tid) / "outputs" / "plan.md").read_text() == PLAN
    assert turns == [
        ("plan", "[case:plan] Create hello.txt containing hi."),
        ("act", PLAN_APPROVAL),
    ]
    assert backend.scalar("SELECT plan_state FROM evals_app_trial WHERE id = ?", tid) == "approved"


def test_the_profiles_key_came_from_the_workers_environment_by_name(batch, servers):
    anthropic, _ = servers

    assert {r.headers.get("x-api-key") for r in anthropic.requests_to("/v1/messages")} == {
        WORKER_KEY
    }
    assert anthropic.unused() == 0
