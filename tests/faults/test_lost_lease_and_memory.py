"""Faults of a trial's hot path, made for real in a `proctor eval` process:

- another process takes a running trial's lease over: the first process stops writing that
  trial's events, turns and checks at once, kills its agent instead of letting it run on, and
  says why in one line;
- an agent printing a million events: the worker's memory stays bounded by the event cap
  (measured against a small trial's in the same test, never an absolute figure).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from conftest import PROCTOR, proctor_env
from e2e.running import write_eval
from process_state import running

STREAM_AGENT = r"""
import json, os, sys, time
open(os.environ["PID_FILE"], "w").write(str(os.getpid()))
print(json.dumps({"_tag": "Started", "sessionId": "s", "model": "m"}), flush=True)
for i in range(400):
    print(json.dumps({"_tag": "Message", "role": "assistant", "text": f"still working {i}"}), flush=True)
    time.sleep(0.05)
    if i == 20 and os.environ.get("QUIET"):
        time.sleep(60)  # works on without a word: only the heartbeat can notice the theft
print(json.dumps({"_tag": "Finished", "reason": "done"}), flush=True)
"""


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has used so far (user and system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("quiet", [False, True], ids=["printing-agent", "quiet-agent"])
def test_a_process_whose_lease_was_taken_stops_writing_and_kills_its_agent(tmp_path, quiet):
    agent = tmp_path / "agent.py"
    agent.write_text(STREAM_AGENT)
    pid_file = tmp_path / "agent.pid"
    write_eval(
        tmp_path,
        "stolen.eval.py",
        f"""
        from proctor import case, command, profile, suite, variant

        s = suite("stolen", prompt="work", trials=1,
                  cases=[case("long", validate=command("true"))],
                  variants=[variant("command", profile=profile("streamer",
                      run="python3 {agent}",
                      env={{"PID_FILE": {str(pid_file)!r}, "QUIET": {"1" if quiet else ""!r}}}))])
        """,
    )
    home = tmp_path / "home"
    # Leases renewed every second, so the heartbeat notices the theft quickly too.
    env = proctor_env(home, PROCTOR_LEASE_S="3")
    proc = subprocess.Popen(
        [PROCTOR, "eval", "stolen.eval.py", "--json"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        db = home / "proctor.sqlite3"
        wait_for(lambda: db.exists(), 60, "the database")
        conn = sqlite3.connect(db, timeout=30)

        def events() -> int:
            try:
                return conn.execute("select count(*) from evals_app_event").fetchone()[0]
            except sqlite3.OperationalError:
                return 0

        wait_for(lambda: events() >= 20, 60, "the agent's first events")
        agent_pid = int(pid_file.read_text())
        # The theft: this test process (another process on the database) takes the lease.
        with conn:
            conn.execute(
                "update evals_app_trial set lease_owner = 'thief:1:ffff', "
                "lease_expires_at = datetime('now', '+1 hour') where status = 'running'"
            )
        wait_for(lambda: not running(agent_pid), 10, "the agent to be killed")
        settled = events()
        cpu_before, waited_from = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(1.5)  # longer than a flush's wait: a writing process would have written
        assert events() == settled, "the process that lost the lease went on writing events"
        # It waits for the thief's trial without spinning: its own trial ended, and a wait for
        # local trials that already ended must not return at once, again and again.
        busy = (cpu_seconds(proc.pid) - cpu_before) / (time.monotonic() - waited_from)
        assert busy < 0.5, f"`proctor eval` used {busy:.0%} of a core while only waiting"
        assert conn.execute("select count(*) from evals_app_check").fetchone()[0] == 0
        (status, owner) = conn.execute("select status, lease_owner from evals_app_trial").fetchone()
        assert (status, owner) == ("running", "thief:1:ffff")  # the thief's, untouched
        assert settled < 400  # it stopped well before the agent would have finished
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    # It said why, once, on its stderr: the trial is the thief's now.
    said = [line for line in (proc.stderr.read() if proc.stderr else "").splitlines()
            if "lost its lease" in line]  # fmt: skip
    assert len(said) == 1, said
    assert "is already being run elsewhere (by thief:1:ffff)" in said[0]


MANY_AGENT = r"""
import sys
n = int(sys.argv[1])
out = sys.stdout
out.write('{"_tag":"Started","sessionId":"s","model":"m"}\n')
line = '{"_tag":"Message","role":"assistant","text":"event number %d of a long stream"}\n'
for i in range(n):
    out.write(line % i)
out.write('{"_tag":"Finished","reason":"done"}\n')
"""


def peak_rss_kb(tmp_path: Path, events: int) -> tuple[int, str]:
    folder = tmp_path / f"run-{events}"
    folder.mkdir()
    (folder / "agent.py").write_text(MANY_AGENT)
    write_eval(
        folder,
        "many.eval.py",
        f"""
        from proctor import case, command, profile, suite, variant

        s = suite("many", prompt="talk", trials=1,
                  cases=[case("stream", validate=command("true"), timeout_ms=900_000)],
                  variants=[variant("command", profile=profile("talker",
                      run="python3 {folder / "agent.py"} {events}"))])
        """,
    )
    # A small cap, so that a transcript or buffer keeping every event would show at once.
    env = proctor_env(folder / "home", PROCTOR_MAX_TRIAL_EVENTS="2000")
    proc = subprocess.Popen(
        [PROCTOR, "eval", "many.eval.py", "--json"],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out[-2000:]
    return usage.ru_maxrss, out


def test_a_million_events_keep_the_worker_memory_bounded(tmp_path):
    baseline, _ = peak_rss_kb(tmp_path, 1_000)
    peak, report = peak_rss_kb(tmp_path, 1_000_000)
    assert '"status": "passed"' in report
    # Kept in full, a million events are well over 500 MB in Python objects; bounded, the
    # worker stays near the small trial's size. Generous: the baseline plus half of it.
    assert peak < baseline * 1.5, (baseline, peak)
