"""The real Gemini CLI launches a ``mock.mcp`` server over stdio (``mcpServers`` in the trial's
settings.json) and calls its tool, against the fake Gemini API on loopback."""

from __future__ import annotations

import json

from conftest import proctor_env
from e2e.running import Backend, write_eval
from fakes.gemini_api import (  # noqa: F401
    MODEL,
    FakeGeminiServer,
    function_call,
    gemini_server_fixture,
)
from harnesses.agent_cli_runs import require_cli


def eval_text(server: FakeGeminiServer, cli_path: str) -> str:
    return f"""
    from proctor import assertion, case, mock, profile, suite, variant

    def create_ticket(title: str, state=None):
        \"\"\"Open a support ticket.\"\"\"
        return {{"id": "T-1", "title": title}}

    gemini = profile("gemini", env={{
        "GOOGLE_GEMINI_BASE_URL": {server.base_url!r},
        "GEMINI_API_KEY": "test-key",
        "PATH": {cli_path!r},
    }})

    tickets = suite(
        "gemini-tickets",
        prompt="Open a ticket about the printer.",
        mocks=[mock.mcp("tickets", tools={{"create_ticket": create_ticket}})],
        cases=[case("printer", validate=assertion("called", "tickets create_ticket"))],
        variants=[variant("gemini", model={MODEL!r}, profile=gemini)],
    )
    """


def test_gemini_calls_the_mocked_mcp_tool_over_stdio(
    gemini_server: FakeGeminiServer, tmp_path
) -> None:
    cli_path = require_cli("gemini")
    gemini_server.script(
        function_call("mcp_tickets_create_ticket", {"title": "Printer jammed"}), "Opened T-1."
    )
    backend = Backend("sqlite", proctor_env(tmp_path / "home"))
    write_eval(tmp_path / "project", "tickets.eval.py", eval_text(gemini_server, cli_path))
    report = backend.eval_json(tmp_path / "project")

    assert report["runs"][0]["trials"][0]["status"] == "passed", json.dumps(report, indent=2)
    declared = [
        d["name"]
        for t in gemini_server.agent_calls()[0]["tools"]
        for d in t.get("functionDeclarations", [])
    ]
    assert "mcp_tickets_create_ticket" in declared
    assert "T-1" in json.dumps(gemini_server.agent_calls()[1]["contents"][-1])
    trial_id = backend.trial_ids(report["batch"])[0]
    assert backend.rows(
        "SELECT mock, path FROM evals_app_mockcall WHERE trial_id = ?", trial_id
    ) == [("tickets", "create_ticket")]
