"""A mock call is stored while its trial runs (so a reload of the trial page finds it), and
kept under the same id when the whole log is stored at the trial's end. The live page itself:
tests/dashboard/test_live_mock_calls.py."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from pathlib import Path

from conftest import PROCTOR, proctor_env
from e2e.running import Backend, write_eval

# Calls the mock, then keeps working for a while: the trial is still running after the call.
AGENT = r"""
import json, os, time, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
request = urllib.request.Request(os.environ["BILLING_URL"] + "/refunds", method="POST",
    data=json.dumps({"order_id": 42}).encode(), headers={"Content-Type": "application/json"})
print(opener.open(request, timeout=10).read().decode(), flush=True)
time.sleep(6)
print("done")
"""

EVAL = """
from proctor import assertion, case, mock, profile, suite, variant

live = suite(
    "live-calls",
    prompt="Refund order 42.",
    mocks=[mock.api("billing", routes={{"POST /refunds": mock.response(201, json={{"id": "re_1"}})}})],
    cases=[case("refund-slowly", validate=[assertion("called", "billing POST /refunds")])],
    variants=[variant("command",
        profile=profile("slow", dir={agents!r}, run="python3 \\"$PROCTOR_PROFILE_DIR/agent.py\\""))],
)
"""


def poll(database: Path) -> tuple[str | None, list[int]]:
    """The trial's status and its mock call rows' ids, read while ``proctor eval`` writes."""
    try:
        conn = sqlite3.connect(database, timeout=1)
        try:
            status = conn.execute("SELECT status FROM evals_app_trial").fetchone()
            ids = [row[0] for row in conn.execute("SELECT id FROM evals_app_mockcall")]
        finally:
            conn.close()
    except sqlite3.Error:  # not created yet, or busy: ask again
        return None, []
    return (status[0] if status else None), ids


def test_a_call_is_stored_while_the_trial_runs_and_keeps_its_row_at_the_end(tmp_path) -> None:
    agents = tmp_path / "agent"
    agents.mkdir()
    (agents / "agent.py").write_text(AGENT, encoding="utf-8")
    folder = tmp_path / "evals"
    write_eval(folder, "live.eval.py", EVAL.format(agents=str(agents)))
    backend = Backend("sqlite", proctor_env(tmp_path / "home"))
    proc = subprocess.Popen(
        [PROCTOR, "eval", "--json"],
        cwd=folder,
        env=backend.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen_running: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            status, ids = poll(backend.sqlite_path)
            if status == "running" and ids:
                seen_running = ids
                break
            time.sleep(0.1)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    assert seen_running, "the call was not stored before the trial ended"
    report = json.loads(stdout)
    assert report["runs"][0]["trials"][0]["status"] == "passed"
    rows = backend.rows("SELECT id, method, path, status FROM evals_app_mockcall")
    # The row stored while running is the one kept: an open page knows it by id.
    assert rows == [(seen_running[0], "POST", "/refunds", 201)]
