"""Mock definitions as an eval file writes them: checked at load with one sentence per broken
rule, part of the case version (a changed route is a new version), and read back by checks
through the call-log helpers, the call assertions and a judge's evidence."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest

from evals_app.resolution import resolve_case
from proctor import assertion, case, mock, suite, variant
from proctor.rules import suite_problems
from runner.core.mock_calls import MockCall, MockLog, call_assertion_verdict
from runner.grading.judges import judge_prompt
from runner.mocks import mock_logs, start_mocks, stop_mocks
from runner.sandboxes.local import LocalSandbox

HERE = Path(__file__)


def refund(request, state):
    return mock.response(201, json={"ok": True})


def a_suite(*mocks, checks=None) -> object:
    return suite(
        "s",
        prompt="p",
        mocks=list(mocks),
        cases=[case("c", validate=checks or [assertion("icontains", "x")])],
        variants=[variant("command")],
    )


def version_hash(s) -> str:
    return resolve_case(s, s.cases[0], HERE).definition_hash


def test_a_changed_route_makes_a_new_case_version_and_the_same_one_does_not() -> None:
    base = version_hash(a_suite(mock.api("billing", routes={"POST /refunds": refund})))
    same = version_hash(a_suite(mock.api("billing", routes={"POST /refunds": refund})))
    renamed = version_hash(a_suite(mock.api("billing", routes={"POST /refund": refund})))
    fixed = version_hash(a_suite(mock.api("billing", routes={"POST /refunds": {"ok": True}})))
    scripted = version_hash(a_suite(mock.cli("gh", script={"pr create *": "url"})))
    rescripted = version_hash(a_suite(mock.cli("gh", script={"pr create *": "other url"})))
    assert base == same
    assert len({base, renamed, fixed}) == 3
    assert scripted != rescripted


def test_the_definition_names_the_handler_by_its_source() -> None:
    s = a_suite(mock.api("billing", routes={"POST /refunds": refund}))
    resolved = resolve_case(s, s.cases[0], HERE)
    route = resolved.definition["mocks"][0]["routes"]["POST /refunds"]
    assert route["handler"]["qualname"] == "refund" and len(route["handler"]["sha256"]) == 64
    # A case without mocks has no "mocks" key: existing case versions keep their hash.
    plain = a_suite()
    assert "mocks" not in resolve_case(plain, plain.cases[0], HERE).definition


def test_an_mcp_tools_schema_comes_from_its_parameters() -> None:
    def create_ticket(title: str, priority: str = "low", count: int = 1, state=None):
        """Open a ticket."""

    s = a_suite(mock.mcp("tickets", tools={"create_ticket": create_ticket}))
    tool = resolve_case(s, s.cases[0], HERE).definition["mocks"][0]["tools"]["create_ticket"]
    assert tool["description"] == "Open a ticket."
    assert tool["schema"] == {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "priority": {"type": "string"},
            "count": {"type": "integer"},
        },
        "required": ["title"],
    }


@pytest.mark.parametrize(
    ("mocks", "checks", "expected"),
    [
        (
            [mock.api("billing", routes={"REFUND /x": {}})],
            None,
            "mock 'billing': route 'REFUND /x' must be 'METHOD /path'",
        ),
        (
            [mock.cli("gh")],
            None,
            "mock 'gh': a cli mock takes script=... or handler=..., one of them",
        ),
        (
            [mock.api("Billing API", routes={})],
            None,
            "mock 'Billing API': a mock's name is 1 to 40 lowercase letters",
        ),
        (
            [mock.api("billing", routes={}), mock.api("billing", routes={})],
            None,
            "mock 'billing' is defined twice",
        ),
        (
            [mock.mcp("tickets", tools={})],
            None,
            "mock 'tickets': an mcp mock needs at least one tool",
        ),
        (
            [mock.api("billing", routes={})],
            [assertion("called", "payments POST /charges")],
            "no mock named 'payments' in this case (its mocks: billing)",
        ),
        (
            [mock.api("billing", routes={})],
            [assertion("call-count", {"call": "billing POST /refunds"})],
            "a call-count value is {'call': '...', 'count': n}",
        ),
        # Each of these raised TypeError at import, or errored every trial (env=5), or served
        # a route no request could reach ({id without its brace).
        (
            [mock.api("billing", routes=5)],
            None,
            "mock 'billing': routes must map 'METHOD /path' to answers",
        ),
        (
            [mock.cli("gh", script=5)],
            None,
            "mock 'gh': script must map argument patterns to answers",
        ),
        ([mock.mcp("tickets", tools=5)], None, "mock 'tickets': tools must map tool names"),
        (
            [mock.api("billing", routes={"GET /x": {}}, env=5)],
            None,
            "mock 'billing': env names the variable that holds its URL, like 'BILLING_URL' (got 5)",
        ),
        (
            [mock.api("billing", routes={"GET /orders/{id": {}})],
            None,
            "route 'GET /orders/{id': a placeholder is a name in braces",
        ),
        (
            [mock.api("billing", routes={"GET /x": 5})],
            None,
            "route 'GET /x' answers with an int",
        ),
    ],
)
def test_a_broken_mock_is_one_sentence_naming_the_file_case_and_rule(
    mocks, checks, expected
) -> None:
    problems = [str(p) for p in suite_problems(a_suite(*mocks, checks=checks), "x.eval.py")]
    assert any(p.startswith("x.eval.py: suite s") and expected in p for p in problems), problems


def api_call(seq: int, method: str, path: str, body=None, status: int = 200) -> MockCall:
    return MockCall(
        mock="billing", kind="api", seq=seq, at=time.time(), method=method, path=path,
        status=status, body=body,
    )  # fmt: skip


def test_the_call_log_helpers_and_call_assertions_read_what_was_called() -> None:
    log = MockLog(
        "billing",
        "api",
        [
            api_call(1, "GET", "/orders/42"),
            api_call(2, "POST", "/refunds", {"order_id": 42, "amount": 30}, 201),
            api_call(3, "POST", "/refunds", {"order_id": 7, "amount": 5}, 201),
        ],
    )
    assert log.called("POST", "/refunds") and not log.called("DELETE", "/refunds")
    assert log.called("GET /orders/{id}") and log.count("GET", "/orders/*") == 1
    assert log.count("POST", "/refunds", json={"order_id": 42}) == 1
    assert log.last("POST", "/refunds").json == {"order_id": 7, "amount": 5}
    assert log.first("POST", "/refunds").seq == 2
    mocks = {"billing": log}
    assert call_assertion_verdict("called", "billing POST /refunds", mocks) == (
        True,
        "billing: POST /refunds called 2 time(s)",
    )
    assert call_assertion_verdict("not-called", "billing DELETE /orders/42", mocks)[0]
    assert not call_assertion_verdict(
        "call-count", {"call": "billing POST /refunds", "count": 1}, mocks
    )[0]
    assert call_assertion_verdict(
        "call-count", {"call": "billing POST /refunds", "min": 1, "max": 2}, mocks
    ) == (True, "billing: POST /refunds called 2 time(s) (expected 1 to 2)")
    assert "2. POST /refunds" in log.summary()


def test_a_judge_is_shown_the_calls_the_agent_made() -> None:
    from proctor import judge
    from runner.core.transcript import Transcript
    from runner.grading.checks import CheckContext

    box = LocalSandbox()
    try:
        log = MockLog("billing", "api", [api_call(1, "POST", "/refunds", {"order_id": 42}, 201)])
        ctx = CheckContext(
            sandbox=box, transcript=Transcript(), prepared=None, mocks={"billing": log}
        )
        prompt = judge_prompt(judge("refunded once"), ctx)[1]["content"]
    finally:
        box.destroy()
    assert (
        '<mock_calls>\nbilling (api): 1 call(s)\n  1. POST /refunds {"order_id": 42} -> 201'
        in prompt
    )


def test_a_handler_that_hangs_answers_500_and_the_trial_goes_on() -> None:
    def slow(request, state):
        time.sleep(30)

    box = LocalSandbox()
    try:
        running = start_mocks(
            [mock.api("billing", routes={"GET /slow": slow, "GET /ok": {"ok": True}})],
            box,
            limit_s=0.5,
        )
        base = running.access.env["BILLING_URL"]
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with pytest.raises(urllib.error.HTTPError) as failed:
            opener.open(base + "/slow", timeout=10)
        assert failed.value.code == 500
        assert "did not finish within 0.5 s" in json.loads(failed.value.read())["error"]
        assert json.load(opener.open(base + "/ok", timeout=10)) == {"ok": True}
        calls = mock_logs(box)["billing"].calls
    finally:
        stop_mocks(box)
        box.destroy()
    assert [(c.path, c.status) for c in calls] == [("/slow", 500), ("/ok", 200)]
    assert "did not finish" in calls[0].error
