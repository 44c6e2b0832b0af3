"""The outside-write audit counts the trials of every Proctor process on the machine, not only
its own and its sibling workers': unrelated `proctor eval`s (each its own home and database,
-j 1) say their writes may be the others', and name the other processes. That holds for two
whose agents meet, for a short eval that came and went while a long one's agent ran (gone
before the long one's audit), and for one killed with SIGKILL mid-trial; an eval run after the
killed one is dead is not told of it."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from ceilings import eventually
from conftest import PROCTOR, proctor_env

from e2e.running import Backend, trial_folder, write_eval

NOTE = "may include writes of 1 other trial running at the same time"
WAIT = "n=0; while [ ! -e {path} ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done; "


@pytest.fixture
def stamp() -> Iterator[str]:
    stamp = secrets.token_hex(4)
    yield stamp
    for path in Path("/opt").glob(f"proctor-machine-{stamp}-*"):
        path.unlink()


def _eval(folder: Path, stamp: str, before_writing: str = "") -> None:
    """An eval of one trial whose agent runs ``before_writing`` (shell), then writes a file
    outside its workspace."""
    run = (
        before_writing
        + f'echo x > "/opt/proctor-machine-{stamp}-$$.txt"; '
        + """echo '{"_tag":"Finished","reason":"done"}'"""
    )
    write_eval(
        folder,
        "machine.eval.py",
        f"""
        from proctor import case, command, profile, suite, variant

        s = suite("machine", prompt="write outside",
                  cases=[case("writer", validate=command("true"))],
                  variants=[variant("command", sandbox="local",
                                    profile=profile("writer", run={run!r}))])
        """,
    )


def _backend(tmp_path: Path, name: str) -> Backend:
    return Backend("sqlite", proctor_env(tmp_path / f"home-{name}"))


def _start(backend: Backend, folder: Path) -> subprocess.Popen[str]:
    """`proctor eval --json -j 1` in ``folder``, not waited for."""
    return subprocess.Popen(
        [PROCTOR, "eval", "--json", "-j", "1"],
        cwd=folder,
        env=backend.env,
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _report(process: subprocess.Popen[str]) -> dict:
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, f"exit {process.returncode}\n{stdout}\n{stderr}"
    return json.loads(stdout)


def _record(backend: Backend, report: dict) -> object:
    """The trial's outside-writes.json."""
    (trial_id,) = backend.trial_ids(report["batch"])
    folder = trial_folder(backend, report["batch"], trial_id)
    return json.loads((folder / "outside-writes.json").read_text())


def _counts_one_other(record: object, pid: int) -> None:
    assert isinstance(record, dict), f"a plain list: no other trial counted: {record}"
    assert record["concurrent_trials"] == 1 and record["note"] == NOTE, record
    assert record["in_other_processes"] == {str(pid): 1}, record


def test_two_unrelated_evals_whose_agents_meet_each_count_the_other(
    tmp_path: Path, stamp: str
) -> None:
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    # Each agent says it started, then waits until the other has: both surely run at once.
    meet = f'touch "{meeting}/$$"; n=0; while [ "$(ls "{meeting}" | wc -l)" -lt 2 ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done; '
    backends = {name: _backend(tmp_path, name) for name in "ab"}
    for name in backends:
        _eval(tmp_path / name, stamp, meet)
    processes = {name: _start(backend, tmp_path / name) for name, backend in backends.items()}
    with ThreadPoolExecutor(2) as pool:
        reports = dict(zip(processes, pool.map(_report, processes.values()), strict=True))
    assert len(list(meeting.iterdir())) == 2, "both agents started"
    _counts_one_other(_record(backends["a"], reports["a"]), processes["b"].pid)
    _counts_one_other(_record(backends["b"], reports["b"]), processes["a"].pid)


def test_an_eval_that_came_and_went_during_another_agent_run_is_counted(
    tmp_path: Path, stamp: str
) -> None:
    started, release = tmp_path / "long-started", tmp_path / "release"
    long_backend, short_backend = _backend(tmp_path, "long"), _backend(tmp_path, "short")
    _eval(tmp_path / "long", stamp, f'touch "{started}"; ' + WAIT.format(path=f'"{release}"'))
    _eval(tmp_path / "short", stamp)
    long = _start(long_backend, tmp_path / "long")
    try:
        assert eventually(started.exists), "the long eval's agent started"
        short = _start(short_backend, tmp_path / "short")
        short_report = _report(short)  # its process is gone before the long agent ends
    finally:
        release.touch()
    long_report = _report(long)
    _counts_one_other(_record(long_backend, long_report), short.pid)
    _counts_one_other(_record(short_backend, short_report), long.pid)


def test_an_eval_killed_mid_trial_is_counted_beside_it_and_not_after(
    tmp_path: Path, stamp: str
) -> None:
    long_started, killed_started = tmp_path / "long-started", tmp_path / "killed-started"
    release, never = tmp_path / "release", tmp_path / "never"
    backends = {name: _backend(tmp_path, name) for name in ("long", "killed", "after")}
    _eval(tmp_path / "long", stamp, f'touch "{long_started}"; ' + WAIT.format(path=f'"{release}"'))
    _eval(
        tmp_path / "killed", stamp, f'touch "{killed_started}"; ' + WAIT.format(path=f'"{never}"')
    )
    _eval(tmp_path / "after", stamp)
    long = _start(backends["long"], tmp_path / "long")
    try:
        assert eventually(long_started.exists), "the long eval's agent started"
        killed = _start(backends["killed"], tmp_path / "killed")
        assert eventually(killed_started.exists), "the killed eval's agent started"
        os.kill(killed.pid, signal.SIGKILL)
        killed.communicate(timeout=60)
    finally:
        release.touch()
    _counts_one_other(_record(backends["long"], _report(long)), killed.pid)
    # Run once both are gone: a killed process's trial does not run on in the board's eyes.
    after = _record(backends["after"], _report(_start(backends["after"], tmp_path / "after")))
    assert isinstance(after, list) and after, f"alone, a plain list of its write: {after}"
