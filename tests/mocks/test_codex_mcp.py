"""The real Codex CLI launches a ``mock.mcp`` server over stdio (the harness passes it as
``-c mcp_servers.<name>=...``) and calls its tool, against the fake Responses API on loopback."""

from __future__ import annotations

import json

from conftest import proctor_env
from e2e.running import Backend, write_eval
from fakes.openai_responses import (  # noqa: F401
    FakeResponsesServer,
    function_call,
    responses_server_fixture,
)
from harnesses.agent_cli_runs import require_cli


def namespaced_call(namespace: str, name: str, arguments: dict):
    """A scripted function call to a tool of a namespace (how Codex offers an MCP server's
    tools): the fake's function call, with the item's ``namespace`` set."""
    plain = function_call(name, arguments)

    def answer(request):
        reply = plain(request)
        for _event, data in reply.body.events:
            item = data.get("item") if isinstance(data, dict) else None
            if isinstance(item, dict) and item.get("type") == "function_call":
                item["namespace"] = namespace
        return reply

    return answer


def eval_text(server: FakeResponsesServer, cli_path: str) -> str:
    return f"""
    from proctor import assertion, case, mock, profile, suite, variant

    def create_ticket(title: str, state=None):
        \"\"\"Open a support ticket.\"\"\"
        return {{"id": "T-1", "title": title}}

    codex = profile("codex", env={{
        "OPENAI_BASE_URL": {server.url!r},
        "OPENAI_API_KEY": "test-key",
        "PATH": {cli_path!r},
    }})

    tickets = suite(
        "codex-tickets",
        prompt="Open a ticket about the printer.",
        mocks=[mock.mcp("tickets", tools={{"create_ticket": create_ticket}})],
        cases=[case("printer", validate=assertion("called", "tickets create_ticket"))],
        variants=[variant("codex", model="gpt-fake-codex", profile=codex)],
    )
    """


def test_codex_calls_the_mocked_mcp_tool_over_stdio(
    responses_server: FakeResponsesServer, tmp_path
) -> None:
    cli_path = require_cli("codex")
    responses_server.script(
        namespaced_call("mcp__tickets", "create_ticket", {"title": "Printer jammed"}), "Opened T-1."
    )
    backend = Backend("sqlite", proctor_env(tmp_path / "home"))
    write_eval(tmp_path / "project", "tickets.eval.py", eval_text(responses_server, cli_path))
    report = backend.eval_json(tmp_path / "project")

    # What Codex offered and answered comes first: when the trial fails, they say whether the
    # tool never reached Codex (its MCP server not started) or the call never reached the mock.
    calls = responses_server.agent_calls()
    offered = [t for t in calls[0]["tools"] if t.get("name") == "mcp__tickets"]
    assert [t["name"] for t in offered[0]["tools"]] == ["create_ticket"], calls[0]["tools"]
    answered = calls[1]["input"][-1]
    trial = report["runs"][0]["trials"][0]
    trial_dir = backend.artifacts / "batches" / str(report["batch"]) / "trials" / str(trial["id"])
    assert answered["type"] == "function_call_output" and '"id":"T-1"' in answered["output"], (
        answered,
        (trial_dir / "output.log").read_text()[-4000:],
    )
    assert trial["status"] == "passed", json.dumps(report, indent=2)
    trial_id = backend.trial_ids(report["batch"])[0]
    assert backend.rows(
        "SELECT mock, path FROM evals_app_mockcall WHERE trial_id = ?", trial_id
    ) == [("tickets", "create_ticket")]
