"""The example suites under examples/mocks, run by ``proctor eval`` as a new user would: the
right agent passes, the one that only says it did the work fails on the call checks; the calls
are recorded (secrets redacted) as artifacts and rows. Two trials at once keep their own state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO, proctor_env
from e2e.running import Backend, trial_folder, write_eval

EXAMPLES = REPO / "examples" / "mocks"


@pytest.fixture(scope="module")
def examples_run(tmp_path_factory) -> tuple[Backend, dict]:
    backend = Backend("sqlite", proctor_env(tmp_path_factory.mktemp("home")))
    return backend, backend.eval_json(EXAMPLES)


def results(report: dict) -> dict[tuple[str, str], dict]:
    return {(run["case"], run["variant"]): run["trials"][0] for run in report["runs"]}


def checks_of(backend: Backend, trial_id: int) -> dict[str, bool]:
    rows = backend.rows("SELECT name, passed FROM evals_app_check WHERE trial_id = ?", trial_id)
    return {name: bool(passed) for name, passed in rows}


def trial_of(backend: Backend, report: dict, case: str, variant: str) -> int:
    return backend.scalar(
        "SELECT t.id FROM evals_app_trial t JOIN evals_app_run r ON t.run_id = r.id "
        "JOIN evals_app_variant v ON r.variant_id = v.id JOIN evals_app_caseversion cv "
        "ON r.case_version_id = cv.id JOIN evals_app_case c ON cv.case_id = c.id "
        "WHERE r.batch_id = ? AND v.name = ? AND c.slug = ?",
        report["batch"],
        variant,
        case,
    )


@pytest.mark.parametrize(
    ("case", "right", "call_check"),
    [
        ("refund-broken-order", "command:refunder", "called POST /refunds"),
        ("open-printer-ticket", "command:ticket-opener", "called create_ticket"),
        ("open-pull-request", "command:pr-opener", "ran gh pr create"),
    ],
)
def test_the_right_agent_passes_and_the_one_that_only_says_so_fails_on_the_call(
    examples_run, case, right, call_check
) -> None:
    backend, report = examples_run
    found = {key[1]: trial for key, trial in results(report).items() if key[0] == case}
    assert found[right]["status"] == "passed", json.dumps(found, indent=2)
    assert found["command:claims-only"]["status"] == "failed"
    wrong = trial_of(backend, report, case, "command:claims-only")
    assert checks_of(backend, wrong)[call_check] is False
    assert checks_of(backend, trial_of(backend, report, case, right))[call_check] is True


def test_the_refund_is_recorded_with_its_authorization_header_redacted(examples_run) -> None:
    backend, report = examples_run
    trial_id = trial_of(backend, report, "refund-broken-order", "command:refunder")
    log = trial_folder(backend, report["batch"], trial_id) / "mocks" / "billing.jsonl"
    text = log.read_text()
    calls = [json.loads(line) for line in text.splitlines()]
    assert [(c["method"], c["path"], c["status"]) for c in calls] == [
        ("GET", "/orders/42", 200),
        ("POST", "/refunds", 201),
    ]
    # The GET answered before the refund: logged as it was then, not as the state is now.
    assert calls[0]["response"]["status"] == "paid"
    assert calls[1]["body"] == {"order_id": 42, "amount": 30.0}
    assert calls[1]["headers"]["authorization"] == "[redacted]"
    assert "sk-demo-refunds-key" not in text
    assert "sk-demo-refunds-key" not in backend.all_text()
    assert backend.rows(
        "SELECT method, path, status FROM evals_app_mockcall WHERE trial_id = ? ORDER BY seq",
        trial_id,
    ) == [("GET", "/orders/42", 200), ("POST", "/refunds", 201)]


COUNTER_EVAL = """
from proctor import Verdict, case, mock, profile, suite, variant

def next_id(request, state):
    state["n"] = state.get("n", 0) + 1
    return {"n": state["n"]}

def saw_its_own_counter(ctx):
    answers = [call.response["n"] for call in ctx.mocks["counter"].calls]
    return Verdict(answers == [1, 2, 3], f"answers {answers}")

agent = profile("caller", dir=AGENT_DIR, run="bash run.sh")

counter = suite(
    "mock-counter",
    prompt="count",
    trials=2,
    mocks=[mock.api("counter", routes={"POST /next": next_id})],
    cases=[case("three-calls", validate=saw_its_own_counter)],
    variants=[variant("command", profile=agent)],
)
"""

CALLER = """#!/usr/bin/env bash
echo '{"_tag":"Started","sessionId":"c"}'
for i in 1 2 3; do
  python3 -c 'import os,urllib.request as u; u.build_opener(u.ProxyHandler({})).open(u.Request(os.environ["COUNTER_URL"]+"/next", data=b"{}")).read()'
  sleep 0.3
done
echo '{"_tag":"Message","role":"assistant","text":"counted"}'
echo '{"_tag":"Finished","reason":"done"}'
"""


def test_two_trials_at_once_each_get_their_own_mock_state(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "run.sh").write_text(CALLER)
    project = tmp_path / "project"
    write_eval(project, "counter.eval.py", f"AGENT_DIR = {str(agent)!r}\n" + COUNTER_EVAL)
    backend = Backend("sqlite", proctor_env(tmp_path / "home"))

    report = backend.eval_json(project, "-j", "2")

    trials = report["runs"][0]["trials"]
    assert [t["status"] for t in trials] == ["passed", "passed"], json.dumps(report, indent=2)
    # Both ran at the same time: their calls interleave in time, yet each counted 1, 2, 3.
    spans = backend.rows(
        "SELECT trial_id, MIN(at), MAX(at) FROM evals_app_mockcall GROUP BY trial_id"
    )
    (_, first_start, first_end), (_, second_start, second_end) = spans
    assert first_start < second_end and second_start < first_end


SANDBOXED_EVAL = """
from proctor import assertion, case, profile, suite, variant
import refunds, pull_request

def agent(name):
    return profile(name, dir=str(refunds.AGENTS / name), run="bash run.sh")

sandboxed = suite(
    "mock-sandboxed",
    prompt="Order 42 arrived broken. Refund it, then open a pull request with gh.",
    mocks=[refunds.billing, pull_request.gh],
    cases=[case("refund-and-open", validate=[
        refunds.refunded_in_full,
        assertion("called", "billing POST /refunds", name="refunded"),
    ])],
    variants=[variant("command", profile=agent("refunder"), sandbox=KIND)],
)
"""


@pytest.mark.parametrize("kind", ["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_command_agent_in_a_sandbox_with_the_network_off_reaches_its_mocks(
    kind, tmp_path: Path
) -> None:
    from sandboxes.conftest import require_kind

    require_kind(kind)
    project = tmp_path / "project"
    project.mkdir()
    # The examples' mocks and checks, importable under plain module names, their agents found
    # where the examples keep them.
    (project / "pull_request.py").write_text((EXAMPLES / "pull_request.eval.py").read_text())
    (project / "refunds.py").write_text(
        (EXAMPLES / "refunds.eval.py")
        .read_text()
        .replace('Path(__file__).parent / "agents"', f"Path({str(EXAMPLES / 'agents')!r})")
    )
    write_eval(project, "sandboxed.eval.py", f"KIND = {kind!r}\n" + SANDBOXED_EVAL)
    backend = Backend("sqlite", proctor_env(tmp_path / "home"))

    report = backend.eval_json(project, "--case", "refund-and-open")

    trial = report["runs"][0]["trials"][0]
    assert trial["status"] == "passed", json.dumps(report, indent=2)
    trial_id = backend.trial_ids(report["batch"])[0]
    assert backend.rows(
        "SELECT method, path FROM evals_app_mockcall WHERE trial_id = ? ORDER BY seq", trial_id
    ) == [("GET", "/orders/42"), ("POST", "/refunds")]
