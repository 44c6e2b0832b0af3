"""Each kind of mock, started for a trial, answers a process inside each sandbox kind and logs
the call; in bwrap and docker with the network off, only the mocks' addresses are reachable."""

from __future__ import annotations

import json

import pytest
from sandboxes.conftest import KINDS, LoopbackServer, loopback_server, open_sandbox  # noqa: F401

from proctor import mock
from runner.mocks import mock_logs, start_mocks, stop_mocks

SECRET = "sk-live-abcdef123456"

# Runs inside the sandbox with the sandbox's python3: the api twice (a refund changes the later
# GET), the cli shim with piped stdin, and the MCP server over both its transports.
CLIENT = r"""
import json, os, subprocess, sys, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
base = os.environ["BILLING_URL"]
def call(method, path, body=None):
    request = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["TOKEN"]})
    try:
        return json.load(opener.open(request, timeout=10))
    except urllib.error.HTTPError as error:
        return {"status": error.code}
out = {}
out["refund"] = call("POST", "/refunds", {"order_id": 42, "amount": 30})
out["order"] = call("GET", "/orders/42")
out["missing"] = call("GET", "/nope")
gh = subprocess.run(["gh", "pr", "create", "--title", "Fix it", "--body-file", "-"], input="the body\n", capture_output=True, text=True)
out["gh"] = [gh.returncode, gh.stdout, gh.stderr]
gh = subprocess.run(["gh", "pr", "merge"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
out["gh_unscripted"] = [gh.returncode, gh.stderr]
messages = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "create_ticket", "arguments": {"title": "over stdio"}}},
]
config = json.load(open(os.environ["PROCTOR_MCP_CONFIG"]))
stdio = subprocess.run([sys.executable, os.environ["MCP_STDIO"], config["mcpServers"]["tickets"]["url"]],
    input="".join(json.dumps(m) + "\n" for m in messages), capture_output=True, text=True, timeout=30)
out["stdio"] = [json.loads(line) for line in stdio.stdout.splitlines()]
request = urllib.request.Request(os.environ["TICKETS_URL"], data=json.dumps(messages[2] | {"params": {"name": "create_ticket", "arguments": {"title": "over http"}}}).encode(),
    headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
out["http"] = json.load(opener.open(request, timeout=10))
print(json.dumps(out))
"""


def refund(request, state):
    state["refunded"] = request.json["order_id"]
    return mock.response(201, json={"id": "re_1"})


def order(request, state):
    return {"id": int(request.params["id"]), "refunded": state.get("refunded") == 42}


def create_ticket(title: str, state=None):
    state["n"] = state.get("n", 0) + 1
    return {"id": f"T-{state['n']}", "title": title}


MOCKS = [
    mock.api("billing", routes={"POST /refunds": refund, "GET /orders/{id}": order}),
    mock.cli("gh", script={"pr create *": "https://github.com/o/r/pull/1"}),
    mock.mcp("tickets", tools={"create_ticket": create_ticket}),
]


def run_client(box) -> dict:
    started = start_mocks(MOCKS, box)
    assert started is not None
    env = {"TOKEN": SECRET, "MCP_STDIO": f"{started.access.folder}/mcp_stdio.py"}
    result = box.run(["python3", "-c", CLIENT], env=env, timeout_s=120)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_of_mock_answers_inside_the_sandbox_and_logs_the_call(
    kind,
    open_sandbox,  # noqa: F811
) -> None:
    box = open_sandbox(kind)
    try:
        out = run_client(box)
        logs = mock_logs(box)
    finally:
        stop_mocks(box)

    assert out["refund"] == {"id": "re_1"}
    assert out["order"] == {"id": 42, "refunded": True}  # the state kept the refund
    assert out["missing"] == {"status": 404}
    assert out["gh"] == [0, "https://github.com/o/r/pull/1\n", ""]
    assert out["gh_unscripted"][0] == 1 and "no scripted answer" in out["gh_unscripted"][1]
    assert json.loads(out["stdio"][-1]["result"]["content"][0]["text"])["id"] == "T-1"
    assert out["http"]["result"]["structuredContent"] == {"id": "T-2", "title": "over http"}

    billing, gh, tickets = logs["billing"], logs["gh"], logs["tickets"]
    assert [(c.method, c.path, c.status) for c in billing] == [
        ("POST", "/refunds", 201),
        ("GET", "/orders/42", 200),
        ("GET", "/nope", 404),
    ]
    assert billing.called("POST", "/refunds", json={"order_id": 42})
    assert billing.count("GET", "/orders/{id}") == 1
    assert billing.last("GET", "/nope").error == "no such route"
    assert billing.calls[0].headers["authorization"] == "[redacted]"
    assert SECRET not in json.dumps([c.to_json() for c in billing])
    created = gh.last("pr", "create")
    assert created.argv == ["gh", "pr", "create", "--title", "Fix it", "--body-file", "-"]
    assert created.stdin == "the body\n"
    assert created.cwd == box.workspace
    assert "TOKEN" in created.env_names and SECRET not in json.dumps(created.to_json())
    assert gh.count("pr", "merge") == 1 and gh.last("pr", "merge").status == 1
    assert [c.arguments["title"] for c in tickets] == ["over stdio", "over http"]


@pytest.mark.parametrize("kind", ["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
def test_with_the_network_off_only_the_mocks_are_reachable(
    kind,
    open_sandbox,  # noqa: F811
    loopback_server: LoopbackServer,  # noqa: F811
) -> None:
    box = open_sandbox(kind)
    try:
        out = run_client(box)
        probe = box.run(
            [
                "python3",
                "-c",
                "import socket,sys; s=socket.socket(); s.settimeout(3); "
                f"sys.exit(s.connect_ex(('127.0.0.1', {loopback_server.port})))",
            ],
            timeout_s=30,
        )
    finally:
        stop_mocks(box)
    assert out["refund"] == {"id": "re_1"}
    assert probe.exit_code != 0  # the host's other loopback services are not there
    assert loopback_server.accepted == 0
