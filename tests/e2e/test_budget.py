"""A batch's budget (issue 32): `proctor eval --max-cost` (and a suite's budget=) stops the
batch once its trials' cost reaches the cap: no trial starts after it, a running one is
stopped with its agent's processes, both end as budget_exhausted, and the batch says
"stopped: budget reached at $X". Before it starts, the batch's cost is forecast from history.

The agent is a command agent that reports its cost on a Usage line (costUsd), which is the
cost the trial records (evals_app.cost)."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

from fakes.openai_server import FakeModelServer
from process_state import running

from e2e.running import Backend, write_eval

# Each "costly" trial waits for the slow trial's agent to be running (its pid file), then
# costs $0.20; the "slow" trial's agent leaves a child and waits for it, costing nothing until
# it is stopped.
AGENT = """#!/usr/bin/env bash
echo '{"_tag":"Started","sessionId":"s"}'
if [ "$SPHYNX_PROMPT" = "slow" ]; then
  sleep 600 &
  echo $! > "%(pids)s/child"
  echo $$ > "%(pids)s/agent"
  wait
fi
for _ in $(seq 600); do [ -s "%(pids)s/agent" ] && break; sleep 0.05; done
echo '{"_tag":"Usage","inputTokens":1000,"outputTokens":100,"costUsd":0.2}'
echo '{"_tag":"Finished","reason":"done"}'
"""

EVAL = """
from proctor import case, command, profile, suite, variant

billed = variant("command", profile=profile("billed", run="bash %(agent)s"))

# First, so its one trial is the first a worker takes.
slow = suite("slow", prompt="slow", cases=[case("slow", validate=command("true"))],
             variants=[billed])
s = suite(
    "budgeted",
    prompt="costly",
    trials=%(trials)d,
    cases=[case("costly", validate=command("true"))],
    variants=[billed],%(budget)s
)
"""


def project(tmp_path: Path, *, trials: int = 6, budget: str = "") -> Path:
    pids = tmp_path / "pids"
    pids.mkdir(exist_ok=True)
    agent = tmp_path / "agent" / "billed.sh"
    agent.parent.mkdir(exist_ok=True)
    agent.write_text(AGENT % {"pids": pids})
    folder = tmp_path / "project"
    write_eval(
        folder,
        "budgeted.eval.py",
        EVAL % {"trials": trials, "agent": agent, "budget": budget},
    )
    return folder


def statuses(backend: Backend, batch: int) -> dict[str, list[str]]:
    rows = backend.rows(
        "SELECT c.slug, t.status FROM evals_app_trial t JOIN evals_app_run r ON t.run_id = r.id "
        "JOIN evals_app_caseversion v ON r.case_version_id = v.id "
        "JOIN evals_app_case c ON v.case_id = c.id WHERE r.batch_id = ? ORDER BY t.id",
        batch,
    )
    by_case: dict[str, list[str]] = {}
    for case, status in rows:
        by_case.setdefault(case, []).append(status)
    return by_case


def processes_running_from(folder: Path) -> list[int]:
    """The processes whose command line names ``folder`` (the agent's script lives there)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(folder) in cmdline and running(int(entry.name)):
            found.append(int(entry.name))
    return found


def test_max_cost_stops_the_batch_and_leaves_nothing_running(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    folder = project(tmp_path)
    junit = tmp_path / "junit.xml"

    shown = sqlite_backend.eval(
        folder,
        "-j",
        "2",
        "--max-cost",
        "0.50",
        "--junit",
        str(junit),
        # A stopped trial's worker learns it at its next heartbeat: every 2 s here.
        extra_env={"PROCTOR_LEASE_S": "6"},
    )

    assert shown.returncode == 0, shown.stderr
    assert "Forecast: no cost history for these variants yet; budget $0.5000" in shown.stderr
    batch = int(shown.stderr.split("Batch ", 1)[1].split(":", 1)[0])
    # Three trials of $0.20 reach $0.50: the slow one running then, and the three not started
    # yet, are budget_exhausted, neither failed nor errored.
    assert statuses(sqlite_backend, batch) == {
        "slow": ["budget_exhausted"],
        "costly": ["passed"] * 3 + ["budget_exhausted"] * 3,
    }
    assert f"Batch {batch} stopped: budget reached at $0.6000 (cap $0.5000)" in shown.stdout
    assert "4 trials not run or stopped (budget_exhausted)" in shown.stdout
    assert sqlite_backend.rows(
        "SELECT status, max_cost_usd, round(budget_reached_usd, 4) FROM evals_app_batch "
        "WHERE id = ?",
        batch,
    ) == [("finished", 0.5, 0.6)]
    # Nothing of the stopped agent is left: not it, not its child, nor any process of its script.
    agent_pid = int((tmp_path / "pids" / "agent").read_text())
    child_pid = int((tmp_path / "pids" / "child").read_text())
    assert not running(agent_pid)
    assert not running(child_pid)
    assert processes_running_from(tmp_path / "agent") == []
    # JUnit: the slow case's only trial was stopped by the budget, so it is skipped, saying so.
    skipped = ET.parse(junit).getroot().findall(".//testcase[@classname='slow.slow']/skipped")
    assert [s.get("message") for s in skipped] == [
        "stopped by the batch's budget (budget_exhausted)"
    ]

    # The next batch is forecast from these trials: the median of $0.20 a trial.
    again = sqlite_backend.eval_json(folder, "--case", "costly", "--max-cost", "0.3", "-j", "1")

    costly = [t["status"] for run in again["runs"] for t in run["trials"]]
    assert costly == ["passed"] * 2 + ["budget_exhausted"] * 4
    assert again["budget"] == {
        "max_cost_usd": 0.3,
        "reached_usd": again["budget"]["reached_usd"],
        "budget_exhausted": 4,
    }
    assert round(again["budget"]["reached_usd"], 4) == 0.4


def test_a_suite_budget_caps_the_batch_and_the_forecast_says_what_it_will_cost(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    folder = project(tmp_path, trials=3, budget="\n    budget=10,")
    (tmp_path / "pids" / "agent").write_text("0")  # the costly trials need not wait here
    first = sqlite_backend.eval(folder, "--case", "costly", "-j", "1")
    assert first.returncode == 0, first.stderr
    assert "stopped: budget" not in first.stdout

    # Under a suite budget of $0.30 the second batch stops after two trials of $0.20.
    folder = project(tmp_path, trials=3, budget="\n    budget=0.30,")
    shown = sqlite_backend.eval(folder, "--case", "costly", "-j", "1", "--max-cost", "5")

    assert shown.returncode == 0, shown.stderr
    assert (
        "Forecast: $0.6000 ($0.6000–$0.6000) from recent trials; budget $0.3000 "
        "(it will stop before the end)" in shown.stderr
    )
    assert (
        "billed: 3 trials × $0.2000 median = $0.6000 ($0.6000–$0.6000), from 3 recent trials"
        in shown.stderr
    )
    assert "stopped: budget reached at $0.4000 (cap $0.3000)" in shown.stdout


def test_a_bad_budget_is_one_sentence(sqlite_backend: Backend, tmp_path: Path) -> None:
    folder = project(tmp_path, trials=1, budget="\n    budget=-1,")

    shown = sqlite_backend.eval(folder)

    assert shown.returncode == 2
    assert shown.stderr.strip().endswith(
        "budget must be an amount of US dollars above 0, like 2.50, not -1"
    )
    assert "Traceback" not in shown.stderr
    bad_flag = sqlite_backend.eval(project(tmp_path, trials=1), "--max-cost", "free")
    assert bad_flag.returncode == 2
    assert "--max-cost" in bad_flag.stderr and "Traceback" not in bad_flag.stderr


PRICED_EVAL = """
from proctor import case, suite, variant

priced = variant("chat", model="gpt-fake-priced", name="priced", base_url={url!r},
                 api_key="sk-unused", prices={{"input_per_mtok": 20000, "output_per_mtok": 0}})

s = suite("priced", prompt="Say done.", trials=6,
          cases=[case("say-done", validate=lambda ctx: ctx.answer() == "done")],
          variants=[priced])
"""


def test_a_batch_against_a_costed_model_stops_at_its_budget(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    # The fake model reports 11 prompt tokens a call: at $20,000 per million, $0.22 a trial.
    with FakeModelServer() as server:
        server.script(*["done"] * 6)
        folder = tmp_path / "project"
        write_eval(folder, "priced.eval.py", PRICED_EVAL.format(url=server.url))

        report = sqlite_backend.eval_json(folder, "-j", "1", "--max-cost", "0.50")

        # $0.22, $0.44, then $0.66 reaches the cap: the other three never call the model.
        assert [t["status"] for run in report["runs"] for t in run["trials"]] == ["passed"] * 3 + [
            "budget_exhausted"
        ] * 3
        assert round(report["budget"]["reached_usd"], 4) == 0.66
        assert report["budget"]["budget_exhausted"] == 3
        assert len(server.requests) == 3
        assert server.unused_replies() == 3
