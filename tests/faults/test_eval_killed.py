"""`proctor eval -j 2` runs its trials in worker processes of its own:

- killed outright (SIGKILL, which it cannot catch), it takes them with it: no worker goes on
  running trials that nobody waits for, and their agents are ended by the workers' watchdogs;
- ending normally, its workers do their exit work before it exits: the trial folders they kept
  for reuse are deleted, and their last live messages (each trial's end, the batch's) are sent;
- a worker killed mid-trial (the out-of-memory killer, say): its trial runs again once its
  lease lapses, as with a lost `proctor worker`, and the batch still completes;
- interrupted (Ctrl-C, which a terminal sends to the whole process group), it starts nothing
  more, ends its agents and records its unfinished trials as errored ("interrupted"), so the
  batch closes readable, and it exits 130 with one line, whether its trials ran in worker
  processes (-j 2) or in a thread (-j 1); a batch queued on a broker is left to its workers;
- stopped by SIGTERM (`timeout`, a cancelled CI job, `docker stop`) or SIGHUP (a closed
  terminal), it does the same, exiting 143 or 129; started under `nohup`, SIGHUP leaves it
  running;
- either way, its agents get SIGINT's and SIGHUP's default actions, from a worker process as
  from a thread (a worker that ignored SIGINT once passed the ignoring on to every agent).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import PROCTOR, proctor_env, run_proctor
from e2e.running import Backend, write_eval, write_quick_eval
from process_state import running

from faults.conftest import wait_for

# Says who it is, who started it and which signals it ignores (a JSON file in the folder it is
# given), works the seconds it is given, then finishes.
AGENT = r"""
import json, os, sys, time
folder, seconds = sys.argv[1], float(sys.argv[2])
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
ignored = int(status["SigIgn"], 16)
# Written aside, then renamed: the test reads every file it sees, never a half-written one.
note = os.path.join(folder, f"{os.getpid()}.json")
with open(note + ".part", "w") as out:
    json.dump({"agent": os.getpid(), "parent": os.getppid(), "ignored": ignored}, out)
os.rename(note + ".part", note)
time.sleep(seconds)
print('{"_tag":"Finished","reason":"done"}', flush=True)
"""


def agent_eval(folder: Path, name: str, *, trials: int, seconds: float) -> Path:
    """An eval file of two cases run by AGENT working ``seconds``; returns the folder where
    each agent says who it is."""
    started = folder / "started"
    started.mkdir()
    (folder / "agent.py").write_text(AGENT)
    write_eval(
        folder,
        f"{name}.eval.py",
        f"""
        from proctor import case, command, profile, suite, variant

        s = suite("{name}", prompt="work", trials={trials},
                  cases=[case("first", validate=command("true")),
                         case("second", validate=command("true"))],
                  variants=[variant("command", profile=profile("worker",
                      run="python3 {folder / "agent.py"} {started} {seconds}"))])
        """,
    )
    return started


@contextlib.contextmanager
def cleaned_up(proc: subprocess.Popen, started: Path | None = None) -> Iterator[None]:
    """Whatever the test found, the eval and every agent that said it started are gone after."""
    try:
        yield
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for path in started.glob("*.json") if started is not None else ():
            pid = json.loads(path.read_text())["agent"]
            if running(pid):
                os.kill(pid, signal.SIGKILL)


def test_trials_run_in_worker_processes_that_die_with_a_killed_eval(tmp_path: Path) -> None:
    # The agents work far longer than the test waits.
    started = agent_eval(tmp_path, "killed", trials=1, seconds=120)
    proc = subprocess.Popen(
        [PROCTOR, "eval", "killed.eval.py", "-j", "2", "--json"],
        cwd=tmp_path,
        env=proctor_env(tmp_path / "home"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    with cleaned_up(proc, started):
        wait_for(
            lambda: len(list(started.glob("*.json"))) == 2, timeout=60, what="both agents to start"
        )
        agents = [json.loads(path.read_text()) for path in started.glob("*.json")]
        workers = {agent["parent"] for agent in agents}
        # One worker process per trial at -j 2, neither of them the command's own process.
        assert len(workers) == 2, agents
        assert proc.pid not in workers
        assert all(Path(f"/proc/{worker}/status").exists() for worker in workers)
        ppids = {
            int(line.split()[1])
            for worker in workers
            for line in Path(f"/proc/{worker}/status").read_text().splitlines()
            if line.startswith("PPid:")
        }
        assert ppids == {proc.pid}, "the workers are children of `proctor eval`"

        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        wait_for(
            lambda: not any(running(worker) for worker in workers),
            timeout=10,
            what="the workers to die",
        )
        wait_for(
            lambda: not any(running(agent["agent"]) for agent in agents),
            timeout=15,
            what="the agents to be ended",
        )


def test_workers_delete_their_folders_and_send_their_last_messages_before_eval_exits(
    tmp_path: Path,
) -> None:
    write_quick_eval(tmp_path, trials=6)
    temp = tmp_path / "tmp"
    temp.mkdir()
    home = tmp_path / "home"
    done = subprocess.run(
        [PROCTOR, "eval", "quick.eval.py", "-j", "2", "--json"],
        cwd=tmp_path,
        env=proctor_env(home, TMPDIR=str(temp)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [t["status"] for run in report["runs"] for t in run["trials"]] == ["passed"] * 6
    # Nothing of the trials' folders is left once the command has returned.
    assert [p.name for p in temp.iterdir() if p.name.startswith("proctor-trial-")] == []
    with sqlite3.connect(home / "proctor.sqlite3-live") as outbox:
        messages = [json.loads(row[0]) for row in outbox.execute("select message from outbox")]
    ended = {m["trial_id"] for m in messages if m.get("type") == "trial.changed"}
    assert len(ended) == 6, messages
    assert {"type": "batch.changed", "status": "finished"}.items() <= next(
        m for m in messages if m.get("type") == "batch.changed"
    ).items()


def test_workers_starting_together_sweep_a_dead_proctors_cgroups_without_losing_a_trial(
    tmp_path: Path,
) -> None:
    """Each worker sweeps the cgroups a killed Proctor left when it starts; two starting together
    sweep the same trees, and one vanishing under the other's listing once errored a trial
    (FileNotFoundError) instead of being passed over."""
    from runner.sandboxes import containment

    if not containment.uses_cgroups():
        pytest.skip("runs are contained by their process group here: no cgroup to sweep")
    base = containment.containment().base
    assert base is not None
    left = [base.parent / f"proctor-{4_000_000 + tree}-1" for tree in range(40)]
    for tree in left:
        for run in range(30):
            (tree / f"run-{run}").mkdir(parents=True)
    write_quick_eval(tmp_path, trials=20)
    done = run_proctor(
        "eval",
        "quick.eval.py",
        "-j",
        "2",
        "--json",
        cwd=tmp_path,
        env=proctor_env(tmp_path / "home"),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [t["status"] for run in report["runs"] for t in run["trials"]] == ["passed"] * 20
    assert [tree.name for tree in left if tree.exists()] == []


def test_a_killed_workers_trial_runs_again_and_the_batch_completes(tmp_path: Path) -> None:
    # Two seconds of work: the test strikes at the first agent's worker while it works.
    started = agent_eval(tmp_path, "steady", trials=2, seconds=2)
    home = tmp_path / "home"
    proc = subprocess.Popen(
        [PROCTOR, "eval", "steady.eval.py", "-j", "2", "--json"],
        cwd=tmp_path,
        env=proctor_env(home, PROCTOR_LEASE_S="3"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with cleaned_up(proc):
        wait_for(lambda: any(started.glob("*.json")), timeout=60, what="an agent to start")
        first = min(started.glob("*.json"))
        worker = json.loads(first.read_text())["parent"]
        assert worker != proc.pid
        os.kill(worker, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert [t["status"] for run in report["runs"] for t in run["trials"]] == ["passed"] * 4
    with sqlite3.connect(home / "proctor.sqlite3") as db:
        attempts = sorted(a for (a,) in db.execute("select attempt from evals_app_trial"))
    assert attempts[-1] == 2, f"the killed worker's trial ran again: {attempts}"
    assert "trial worker process died" in err


def _interruptible() -> None:
    """SIGINT and SIGHUP at their defaults, whatever the test runner has: a shell without job
    control starts its background jobs (a CI script's, say) with SIGINT ignored, `nohup` ignores
    SIGHUP, and ``exec`` keeps an ignored signal so."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _signal_bit(number: int) -> int:
    """A signal's bit in /proc's SigIgn mask."""
    return 1 << (number - 1)


# (signal, sent to the whole process group as a terminal sends it, or to the command alone as
# `timeout` and `docker stop` do; -j; the exit status; the line's head; how the trials say it)
STOPS = [
    (signal.SIGINT, True, 1, 130, "Interrupted", "Ctrl-C"),
    (signal.SIGINT, True, 2, 130, "Interrupted", "Ctrl-C"),
    (signal.SIGTERM, False, 1, 143, "Stopped (SIGTERM)", "SIGTERM"),
    (signal.SIGTERM, False, 2, 143, "Stopped (SIGTERM)", "SIGTERM"),
    (signal.SIGHUP, True, 2, 129, "Stopped (SIGHUP)", "SIGHUP"),
]


@pytest.mark.parametrize(
    ("stop", "to_group", "jobs", "status", "headline", "how"),
    STOPS,
    ids=[f"{stop.name}-j{jobs}" for stop, _, jobs, *_ in STOPS],
)
def test_a_stopped_eval_closes_the_batch_with_a_record_and_leaves_no_agent(
    tmp_path: Path,
    stop: signal.Signals,
    to_group: bool,
    jobs: int,
    status: int,
    headline: str,
    how: str,
) -> None:
    # Four trials whose agents work far longer than the test waits.
    started = agent_eval(tmp_path, "stopped", trials=2, seconds=120)
    home = tmp_path / "home"
    proc = subprocess.Popen(
        [PROCTOR, "eval", "stopped.eval.py", "-j", str(jobs)],
        cwd=tmp_path,
        env=proctor_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_interruptible,
    )
    with cleaned_up(proc, started):
        wait_for(
            lambda: len(list(started.glob("*.json"))) == jobs,
            timeout=60,
            what="the agents to start",
        )
        agents = [json.loads(path.read_text()) for path in started.glob("*.json")]
        if to_group:
            os.killpg(proc.pid, stop)
        else:
            proc.send_signal(stop)
        _, err = proc.communicate(timeout=40)
        wait_for(
            lambda: not any(running(agent["agent"]) for agent in agents),
            timeout=15,
            what="the agents to be ended",
        )

    assert proc.returncode == status, err
    assert "Traceback" not in err
    assert (
        f"{headline}: batch 1 closed; 4 unfinished trials recorded as errored (interrupted)." in err
    )
    assert len(list(started.glob("*.json"))) == jobs, "no trial started after the stop"
    with sqlite3.connect(home / "proctor.sqlite3") as db:
        trials = db.execute("select status, finish_reason, error from evals_app_trial").fetchall()
        batches = db.execute("select status from evals_app_batch").fetchall()
    assert (
        trials
        == [
            (
                "errored",
                "interrupted",
                f"proctor eval was interrupted ({how}) before this trial ended",
            )
        ]
        * 4
    )
    assert batches == [("finished",)]
    # The agents could have been interrupted themselves, from a worker process as from a thread.
    for agent in agents:
        assert not agent["ignored"] & (_signal_bit(signal.SIGINT) | _signal_bit(signal.SIGHUP)), (
            agent
        )


def test_an_eval_started_under_nohup_runs_on_through_sighup(tmp_path: Path) -> None:
    started = agent_eval(tmp_path, "nohup", trials=1, seconds=2)

    def as_nohup_starts_it() -> None:
        _interruptible()
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    proc = subprocess.Popen(
        [PROCTOR, "eval", "nohup.eval.py", "-j", "2", "--json"],
        cwd=tmp_path,
        env=proctor_env(tmp_path / "home"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=as_nohup_starts_it,
    )
    with cleaned_up(proc, started):
        wait_for(
            lambda: len(list(started.glob("*.json"))) == 2, timeout=60, what="the agents to start"
        )
        os.killpg(proc.pid, signal.SIGHUP)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert [t["status"] for run in report["runs"] for t in run["trials"]] == ["passed"] * 2
    # What the command ignores, its agents ignore too, as `nohup` means it.
    for path in started.glob("*.json"):
        assert json.loads(path.read_text())["ignored"] & _signal_bit(signal.SIGHUP)


def test_ctrl_c_leaves_a_batch_on_the_broker_to_its_workers(
    tmp_path: Path, scaled: Backend
) -> None:
    # No worker runs here: the command waits for ever until it is interrupted.
    agent_eval(tmp_path, "brokered", trials=1, seconds=1)
    proc = subprocess.Popen(
        [PROCTOR, "eval", "brokered.eval.py"],
        cwd=tmp_path,
        env=scaled.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_interruptible,
    )
    with cleaned_up(proc):
        wait_for(
            lambda: scaled.scalar("SELECT count(*) FROM evals_app_trial") == 2,
            timeout=60,
            what="the batch to be queued",
        )
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)

    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "Stopped waiting: batch 1 goes on on the workers" in err
    assert scaled.rows("SELECT status FROM evals_app_trial") == [("queued",), ("queued",)]
