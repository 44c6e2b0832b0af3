"""A mock with ``host=`` is reached by that name from inside the bwrap and docker sandboxes
(network off: the sandbox's /etc/hosts names it, the bridge answers on loopback), its URL
variable holds the named address, and a variant on the local sandbox is refused at load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import proctor_env
from e2e.running import Backend, trial_folder, write_eval
from sandboxes.conftest import KINDS, open_sandbox  # noqa: F401

from evals_app.resolution import resolve_case
from proctor import assertion, case, mock, profile, suite, variant
from proctor.rules import suite_problems
from runner.mocks import mock_logs, start_mocks, stop_mocks

# The agent: reads the port from $BILLING_URL, then calls the mock by its host name.
AGENT = r"""
import json, os, urllib.parse, urllib.request
url = os.environ["BILLING_URL"]
port = urllib.parse.urlsplit(url).port
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
request = urllib.request.Request(
    f"http://billing.internal:{port}/refunds", method="POST",
    data=json.dumps({"order_id": 42, "amount": 30}).encode(),
    headers={"Content-Type": "application/json"},
)
answer = json.load(opener.open(request, timeout=10))
print("BILLING_URL=" + url)
print("refund " + answer["id"])
"""

EVAL = """
from proctor import Verdict, assertion, case, mock, profile, suite, variant

def by_name(ctx):
    refund = ctx.mocks["billing"].last("POST", "/refunds")
    host = (refund.headers or {{}}).get("host", "") if refund else ""
    return Verdict(host.startswith("billing.internal:"), f"Host: {{host!r}}")

hosts = suite(
    "hosts",
    prompt="Refund order 42.",
    mocks=[mock.api("billing", host="billing.internal", routes={{
        "POST /refunds": mock.response(201, json={{"id": "re_1"}}),
    }})],
    cases=[case("refund-by-name", validate=[
        by_name,
        assertion("called", "billing POST /refunds", name="called POST /refunds"),
    ])],
    variants=[variant("command", sandbox={sandbox!r},
        profile=profile("by-name", dir={agents!r}, run="python3 \\"$PROCTOR_PROFILE_DIR/agent.py\\""))],
)
"""


def write_suite(tmp_path: Path, sandbox: str) -> Path:
    agents = tmp_path / "agent"
    agents.mkdir()
    (agents / "agent.py").write_text(AGENT, encoding="utf-8")
    folder = tmp_path / "evals"
    write_eval(folder, "hosts.eval.py", EVAL.format(sandbox=sandbox, agents=str(agents)))
    return folder


@pytest.mark.parametrize("sandbox", [kind for kind in KINDS if kind != "local"])
def test_the_agent_reaches_the_mock_by_its_host_name(tmp_path, sandbox) -> None:
    folder = write_suite(tmp_path, sandbox)
    backend = Backend("sqlite", proctor_env(tmp_path / "home"))
    report = backend.eval_json(folder)
    trial = report["runs"][0]["trials"][0]
    assert trial["status"] == "passed", json.dumps(report, indent=2)
    checks = dict(backend.rows("SELECT name, passed FROM evals_app_check"))
    assert checks == {"by_name": 1, "called POST /refunds": 1}
    (trial_id,) = backend.trial_ids(report["batch"])
    output = (trial_folder(backend, report["batch"], trial_id) / "output.log").read_text()
    assert "BILLING_URL=http://billing.internal:" in output
    assert "refund re_1" in output
    # The call is recorded under the name the agent used.
    (record,) = [
        backend.json_value(r) for (r,) in backend.rows("SELECT record FROM evals_app_mockcall")
    ]
    assert record["headers"]["host"].startswith("billing.internal:")


def test_a_host_name_under_the_local_sandbox_is_refused_at_load(tmp_path) -> None:
    folder = write_suite(tmp_path, "local")
    backend = Backend("sqlite", proctor_env(tmp_path / "home"))
    result = backend.eval(folder)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for word in ("hosts.eval.py", "refund-by-name", "'billing'", "billing.internal", "local"):
        assert word in lines[0], f"{word!r} is not in {lines[0]!r}"
    assert not backend.exists() or not backend.rows("SELECT id FROM evals_app_trial")


def a_suite(*mocks, sandbox: str = "bwrap"):
    return suite(
        "s",
        prompt="p",
        mocks=list(mocks),
        cases=[case("c", validate=[assertion("icontains", "x")])],
        variants=[variant("command", sandbox=sandbox, profile=profile("p", run="true"))],
    )


def version_hash(s) -> str:
    return resolve_case(s, s.cases[0], Path(__file__)).definition_hash


def test_the_host_name_is_part_of_the_case_version() -> None:
    routes = {"GET /health": {"ok": True}}
    plain = version_hash(a_suite(mock.api("billing", routes=routes)))
    named = version_hash(a_suite(mock.api("billing", routes=routes, host="billing.internal")))
    renamed = version_hash(a_suite(mock.api("billing", routes=routes, host="pay.internal")))
    again = version_hash(a_suite(mock.api("billing", routes=routes, host="billing.internal")))
    assert len({plain, named, renamed}) == 3
    assert named == again


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (mock.api("billing", routes={}, host="Billing_API"), "must be a lowercase host name"),
        (mock.api("billing", routes={}, host="localhost"), "host 'localhost' is the sandbox's own"),
        (mock.cli("gh", script={"*": "x"}), None),
    ],
)
def test_a_bad_host_name_is_one_sentence(item, expected) -> None:
    problems = [str(p) for p in suite_problems(a_suite(item), "x.eval.py")]
    if expected is None:
        assert problems == []
    else:
        assert any(p.startswith("x.eval.py: suite s") and expected in p for p in problems), problems


def test_a_cli_mock_takes_no_host() -> None:
    item = mock.Mock(kind="cli", name="gh", script={"*": "x"}, host="gh.internal")
    problems = [str(p) for p in suite_problems(a_suite(item), "x.eval.py")]
    assert any("a cli mock is a command, it takes no host=" in p for p in problems), problems


MCP_CLIENT = r"""
import json, os, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "create_ticket", "arguments": {"title": "printer"}}}
request = urllib.request.Request(os.environ["TICKETS_URL"], data=json.dumps(call).encode(),
    headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
print(json.dumps({"url": os.environ["TICKETS_URL"], "answer": json.load(opener.open(request, timeout=10))}))
"""


def create_ticket(title: str) -> dict:
    return {"id": "T-1", "title": title}


@pytest.mark.parametrize("kind", [kind for kind in KINDS if kind != "local"])
def test_an_mcp_mock_is_reached_by_its_host_name_over_http(kind, open_sandbox) -> None:  # noqa: F811
    box = open_sandbox(kind)
    mocks = [mock.mcp("tickets", host="tickets.internal", tools={"create_ticket": create_ticket})]
    try:
        assert start_mocks(mocks, box) is not None
        result = box.run(["python3", "-c", MCP_CLIENT], timeout_s=60)
        logs = mock_logs(box)
    finally:
        stop_mocks(box)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["url"].startswith("http://tickets.internal:")
    assert json.loads(out["answer"]["result"]["content"][0]["text"])["id"] == "T-1"
    assert [call.path for call in logs["tickets"]] == ["create_ticket"]
