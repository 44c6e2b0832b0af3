"""Faults of the processes around a trial, through the real `proctor eval`: a `proctor eval`
killed with SIGKILL takes its agents with it and the next one sweeps the folders it left; an
agent printing 1 GB of plain lines is read whole (how fast: ``bench/pipe_speed.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from ceilings import eventually
from conftest import PROCTOR
from process_state import running

from e2e.running import Backend, only_run, write_eval

# Each trial's agent starts a child and a child in a session of its own, notes their pids, then
# works for ten minutes.
SLEEPER_RUN = (
    'sleep 601 & echo $! > "$PID_DIR/child-$$"; '
    'setsid sleep 601 >/dev/null 2>&1 < /dev/null & echo $! > "$PID_DIR/session-$$"; '
    "wait"
)


def _left_folders(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("proctor-"))


def test_a_killed_eval_takes_its_agents_with_it_and_the_next_sweeps_its_folders(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    pid_dir, tmp = tmp_path / "pids", tmp_path / "tmp"
    pid_dir.mkdir()
    tmp.mkdir()
    write_eval(
        tmp_path / "evals",
        "sleepers.eval.py",
        f"""
        from proctor import case, command, profile, suite, variant

        s = suite("sleepers", prompt="work for ten minutes", trials=3,
                  cases=[case("sleeper", timeout_ms=900_000, validate=command("true"))],
                  variants=[variant("command", profile=profile(
                      "sleeper", run={SLEEPER_RUN!r}, env={{"PID_DIR": {str(pid_dir)!r}}}))])
        """,
    )
    env = {**sqlite_backend.env, "TMPDIR": str(tmp)}
    eval_process = subprocess.Popen(
        [PROCTOR, "eval", "-j", "3", "--fail-under", "0"],
        cwd=tmp_path / "evals",
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while len([p for p in pid_dir.iterdir() if p.stat().st_size]) < 6:
            assert eval_process.poll() is None, "proctor eval ended before its agents started"
            assert time.monotonic() < deadline, "the agents did not start in 120 s"
            time.sleep(0.1)
        pids = [int(p.read_text()) for p in pid_dir.iterdir()]
        assert all(running(pid) for pid in pids)
        left_by_the_crash = _left_folders(tmp)
        eval_process.send_signal(signal.SIGKILL)
        eval_process.wait(timeout=10)

        assert eventually(lambda: not any(running(pid) for pid in pids)), [
            pid for pid in pids if running(pid)
        ]
    finally:
        for pid in pids if "pids" in locals() else []:
            if running(pid):
                os.kill(pid, signal.SIGKILL)
        if eval_process.poll() is None:
            eval_process.kill()
    assert any(name.startswith("proctor-trial-") for name in left_by_the_crash)

    # The next `proctor eval` (any eval) removes every folder the killed one made.
    write_eval(
        tmp_path / "next",
        "quick.eval.py",
        """
        from proctor import case, command, profile, suite, variant

        s = suite("quick", prompt="say hi", cases=[case("hi", validate=command("true"))],
                  variants=[variant("command", profile=profile("hi", run="echo hi"))])
        """,
    )
    result = subprocess.run(
        [PROCTOR, "eval", "--fail-under", "0"],
        cwd=tmp_path / "next",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert [name for name in _left_folders(tmp) if name in left_by_the_crash] == []


def test_an_agent_printing_1_gb_of_plain_lines_is_read_to_its_last_line(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    # 1 GiB of 1,000-character lines (1,073,742 of them, the last one short), then one event.
    run = (
        "head -c 1G /dev/zero | tr '\\0' x | fold -w 1000; echo; "
        'echo \'{"_tag": "Message", "role": "assistant", "text": "printed it all"}\''
    )
    write_eval(
        tmp_path,
        "loud.eval.py",
        f"""
        from proctor import case, command, profile, suite, variant

        s = suite("loud", prompt="print a gigabyte",
                  cases=[case("gigabyte", timeout_ms=900_000, validate=command("true"))],
                  variants=[variant("command", profile=profile("loud", run={run!r}))])
        """,
    )
    # The ceiling only guards against hanging; the speed is bench/pipe_speed.py's figure.
    report = sqlite_backend.eval_json(tmp_path, "--fail-under", "0", timeout=900)
    (trial,) = only_run(report, "gigabyte")["trials"]
    assert trial["status"] == "passed", trial
    assert trial["answer"] == "printed it all", "the line after the gigabyte was not read"
