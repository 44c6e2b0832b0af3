"""The real Claude Code CLI calls a tool of a ``mock.mcp`` server during a trial, against the fake
Anthropic API on loopback: the harness hands the CLI the mock (``--mcp-config``), the tool call
reaches the eval's function, and the checks and the trial's record see it."""

from __future__ import annotations

import json

from conftest import proctor_env
from e2e.running import Backend, trial_folder, write_eval
from fakes.anthropic_api import (  # noqa: F401
    FakeAnthropicServer,
    anthropic_server_fixture,
    tool_use,
)
from harnesses.agent_cli_runs import require_cli

TOOL = "mcp__tickets__create_ticket"


def eval_text(server: FakeAnthropicServer, cli_path: str) -> str:
    return f"""
    from proctor import assertion, case, mock, profile, suite, variant

    def create_ticket(title: str, priority: str = "normal", state=None):
        \"\"\"Open a support ticket; returns its id.\"\"\"
        state["opened"] = state.get("opened", 0) + 1
        return {{"id": f"T-{{state['opened']}}", "title": title, "priority": priority}}

    def opened_high_priority(ctx):
        call = ctx.mocks["tickets"].last("create_ticket")
        return call is not None and call.arguments.get("priority") == "high"

    claude = profile("claude", env={{
        "ANTHROPIC_BASE_URL": {server.root_url!r},
        "ANTHROPIC_API_KEY": "test-key",
        "PATH": {cli_path!r},
    }})

    tickets = suite(
        "claude-tickets",
        prompt="The printer on floor 3 is jammed. Open a high-priority ticket.",
        mocks=[mock.mcp("tickets", tools={{"create_ticket": create_ticket}})],
        cases=[case("printer", validate=[
            opened_high_priority,
            assertion("called", "tickets create_ticket", name="called create_ticket"),
        ])],
        variants=[variant("claude-code", model="claude-fake-1", profile=claude)],
    )
    """


def test_claude_code_calls_the_mocked_mcp_tool(
    anthropic_server: FakeAnthropicServer, tmp_path
) -> None:
    cli_path = require_cli("claude")
    anthropic_server.script(
        tool_use(TOOL, {"title": "Printer on floor 3 is jammed", "priority": "high"}),
        "Opened ticket T-1.",
    )
    backend = Backend("sqlite", proctor_env(tmp_path / "home"))
    write_eval(tmp_path / "project", "tickets.eval.py", eval_text(anthropic_server, cli_path))

    report = backend.eval_json(tmp_path / "project")

    trial = report["runs"][0]["trials"][0]
    assert trial["status"] == "passed", json.dumps(report, indent=2)
    # The CLI offered the mock's tool to the model, with the schema read from the function.
    first_call = anthropic_server.agent_calls()[0]
    offered = {tool["name"]: tool for tool in first_call["tools"]}
    assert offered[TOOL]["input_schema"]["required"] == ["title"]
    # The tool's answer went back to the model.
    second_call = json.dumps(anthropic_server.agent_calls()[1])
    assert "T-1" in second_call
    # The call is in the trial's record: the artifact and the database rows.
    trial_id = backend.trial_ids(report["batch"])[0]
    log = trial_folder(backend, report["batch"], trial_id) / "mocks" / "tickets.jsonl"
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(c["path"], c["body"], c["status"]) for c in calls] == [
        ("create_ticket", {"title": "Printer on floor 3 is jammed", "priority": "high"}, 200)
    ]
    assert backend.rows(
        "SELECT mock, method, path FROM evals_app_mockcall WHERE trial_id = ?", trial_id
    ) == [("tickets", "TOOL", "create_ticket")]
