"""The real OpenCode CLI reaches a ``mock.mcp`` server over streamable HTTP (``mcp`` in the
trial's global opencode.json) and calls its tool, against the fake chat API on loopback."""

from __future__ import annotations

import json

from conftest import proctor_env
from e2e.running import Backend, write_eval
from fakes.chat_stream import FakeChatServer, chat_server_fixture, tool_call  # noqa: F401
from harnesses.agent_cli_runs import require_cli


def provider_config(server: FakeChatServer) -> str:
    return json.dumps(
        {
            "provider": {
                "fake": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Fake",
                    "options": {"baseURL": server.url, "apiKey": "{env:FAKE_PROVIDER_KEY}"},
                    "models": {"fake-model": {"name": "Fake model"}},
                }
            }
        }
    )


def eval_text(server: FakeChatServer, cli_path: str) -> str:
    return f"""
    from proctor import assertion, case, mock, profile, suite, variant

    def create_ticket(title: str, state=None):
        \"\"\"Open a support ticket.\"\"\"
        return {{"id": "T-1", "title": title}}

    opencode = profile("opencode", env={{
        "OPENCODE_CONFIG_CONTENT": {provider_config(server)!r},
        "FAKE_PROVIDER_KEY": "test-key",
        "PATH": {cli_path!r},
    }})

    tickets = suite(
        "opencode-tickets",
        prompt="Open a ticket about the printer.",
        mocks=[mock.mcp("tickets", tools={{"create_ticket": create_ticket}})],
        cases=[case("printer", validate=assertion("called", "tickets create_ticket"))],
        variants=[variant("opencode", model="fake/fake-model", profile=opencode)],
    )
    """


def test_opencode_calls_the_mocked_mcp_tool_over_http(
    chat_server: FakeChatServer, tmp_path
) -> None:
    cli_path = require_cli("opencode")
    chat_server.script(
        tool_call("tickets_create_ticket", {"title": "Printer jammed"}), "Opened T-1."
    )
    backend = Backend("sqlite", proctor_env(tmp_path / "home"))
    write_eval(tmp_path / "project", "tickets.eval.py", eval_text(chat_server, cli_path))
    report = backend.eval_json(tmp_path / "project")

    assert report["runs"][0]["trials"][0]["status"] == "passed", json.dumps(report, indent=2)
    offered = [t["function"]["name"] for t in chat_server.agent_calls()[0]["tools"]]
    assert "tickets_create_ticket" in offered
    assert "T-1" in json.dumps(chat_server.agent_calls()[1]["messages"][-1])
    trial_id = backend.trial_ids(report["batch"])[0]
    assert backend.rows(
        "SELECT mock, path FROM evals_app_mockcall WHERE trial_id = ?", trial_id
    ) == [("tickets", "create_ticket")]
