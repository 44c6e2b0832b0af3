"""Gemini CLI, OpenCode and Aider end to end through `proctor eval`: one suite with a variant
per agent, each pointed at its fake model API in its profile, graded by a command check; a
follow-up turn that continues the agent's own session."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from e2e.running import Backend, only_run, write_eval
from fakes.chat_stream import FakeChatServer, tool_call
from fakes.gemini_api import FakeGeminiServer, shell

from harnesses.agent_cli_runs import require_cli
from harnesses.test_aider_cli import require_aider

WORKER_KEY = "gemini-key-held-by-the-worker"

EVAL = """
import json

from proctor import case, command, profile, suite, turns, variant

gemini = variant("gemini", model="gemini-2.5-pro", name="gemini", profile=profile("gemini", env={{
    "GOOGLE_GEMINI_BASE_URL": {gemini_url!r}, "GEMINI_API_KEY": "$PROCTOR_E2E_GEMINI_KEY", "PATH": {node_path!r}}}))
opencode = variant("opencode", model="fake/fake-model", name="opencode", profile=profile("opencode", env={{
    "OPENCODE_CONFIG_CONTENT": json.dumps({{"provider": {{"fake": {{
        "npm": "@ai-sdk/openai-compatible", "options": {{"baseURL": {opencode_url!r}, "apiKey": "test-key"}},
        "models": {{"fake-model": {{}}}}}}}}}}),
    "PATH": {node_path!r}}}))
aider = variant("aider", model="openai/fake-model", name="aider", profile=profile("aider", env={{
    "OPENAI_API_BASE": {aider_url!r}, "OPENAI_API_KEY": "test-key", "AIDER_EDIT_FORMAT": "diff",
    "PATH": {aider_path!r}}}))

agents = suite(
    "agents",
    prompt="[case:{{{{case}}}}] {{{{task}}}}",
    cases=[
        case("hello", variables={{"case": "hello", "task": "Create hello.txt containing hi."}},
             validate=command("grep -qx hi hello.txt")),
        case("follow-up", variables={{"case": "follow-up", "task": "Create hello.txt containing hi."}},
             user=turns("Now append a line saying bye."), validate=command("grep -qx hi hello.txt && grep -qx bye hello.txt")),
    ],
    variants=[gemini, opencode, aider],
)
"""


def aider_edit(search: str, replace: str) -> str:
    """An Aider reply in its diff edit format, editing hello.txt."""
    return f"Editing hello.txt.\n\nhello.txt\n```\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n```\n"


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
def servers() -> Iterator[tuple[FakeGeminiServer, FakeChatServer, FakeChatServer]]:
    with (
        FakeGeminiServer() as gemini,
        FakeChatServer() as opencode,
        FakeChatServer(side_calls_without_tools=False) as aider,
    ):
        yield gemini, opencode, aider


@pytest.fixture(scope="module")
def batch(servers, tmp_path_factory) -> tuple[Backend, dict[str, Any]]:
    from conftest import proctor_env

    gemini, opencode, aider = servers
    node_path, aider_path = require_cli("gemini"), require_aider()
    require_cli("opencode")
    gemini_script = ByCase(
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
    bash = lambda command: tool_call("bash", {"command": command, "description": "edit hello.txt"})  # noqa: E731
    opencode_script = ByCase(
        {
            "hello": [bash("echo hi > hello.txt"), "Created hello.txt."],
            "follow-up": [
                bash("echo hi > hello.txt"),
                "Created hello.txt.",
                bash("echo bye >> hello.txt"),
                "Appended bye.",
            ],
        }
    )
    aider_script = ByCase(
        {
            "hello": [aider_edit("", "hi\n")],
            "follow-up": [aider_edit("", "hi\n"), aider_edit("hi\n", "hi\nbye\n")],
        }
    )
    gemini.script(*[gemini_script] * gemini_script.size)
    opencode.script(*[opencode_script] * opencode_script.size)
    aider.script(*[aider_script] * aider_script.size)
    project = tmp_path_factory.mktemp("project")
    write_eval(
        project,
        "agents.eval.py",
        EVAL.format(
            gemini_url=gemini.base_url,
            opencode_url=opencode.url,
            aider_url=aider.url,
            node_path=node_path,
            aider_path=aider_path,
        ),
    )
    backend = Backend(
        "sqlite",
        proctor_env(tmp_path_factory.mktemp("proctor-home"), PROCTOR_E2E_GEMINI_KEY=WORKER_KEY),
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


@pytest.mark.parametrize("variant", ["gemini", "opencode"])
def test_each_tool_using_agents_transcript_is_recorded_and_its_check_graded(batch, variant):
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


def test_aiders_transcript_is_recorded_and_its_check_graded(batch):
    backend, report = batch
    trial = run_of(report, "hello", "aider")["trials"][0]
    tid = trial_id(backend, report, "hello", "aider")
    events = backend.events(tid)

    assert trial["status"] == "passed", trial
    assert trial["answer"].startswith("Editing hello.txt.")
    assert trial["usage"]["input_tokens"] > 0 and trial["usage"]["output_tokens"] > 0
    changes = [d["paths"] for kind, d in events if kind == "FileChange"]
    assert len(changes) == 1 and changes[0][0].endswith("/hello.txt")
    assert [kind for kind, _ in events if kind != "Log"][-1] == "Finished"


@pytest.mark.parametrize("variant", ["gemini", "opencode"])
def test_a_follow_up_turn_resumes_the_agents_own_session(batch, variant):
    backend, report = batch
    trial = run_of(report, "follow-up", variant)["trials"][0]
    tid = trial_id(backend, report, "follow-up", variant)
    started = [d["session_id"] for kind, d in backend.events(tid) if kind == "Started"]

    assert trial["status"] == "passed", trial
    assert len(started) == 2 and started[0] == started[1]
    assert backend.scalar("SELECT session_id FROM evals_app_trial WHERE id = ?", tid) == started[0]


def test_a_follow_up_turn_continues_aiders_chat_history(batch, servers):
    backend, report = batch
    _, _, aider = servers
    trial = run_of(report, "follow-up", "aider")["trials"][0]
    follow_up = [
        json.dumps(body)
        for body in aider.agent_calls()
        if "[case:follow-up]" in json.dumps(body) and "append a line saying bye" in json.dumps(body)
    ]

    assert trial["status"] == "passed", trial
    assert len(follow_up) == 1 and "Editing hello.txt." in follow_up[0]


def test_the_profiles_key_came_from_the_workers_environment_by_name(batch, servers):
    gemini, opencode, aider = servers

    assert {r.headers.get("x-goog-api-key") for r in gemini.requests_to(gemini.stream_route)} == {
        WORKER_KEY
    }
    assert WORKER_KEY not in batch[0].all_text()
    assert (gemini.unused(), opencode.unused(), aider.unused()) == (0, 0, 0)
