"""`proctor serve` started while a `proctor eval` runs on the same embedded SQLite database: the
eval's running trials hold fresh leases, so serve re-queues none of them; every trial passes
and runs once, and neither process writes a trial the other owns."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from conftest import PROCTOR, free_port, proctor_env
from e2e.running import Backend

from faults.conftest import agent_runs, kill_agents, lease_eval, wait_for

CASES = 8
WORK_S = 4


def test_serve_started_beside_a_running_eval_takes_none_of_its_trials(tmp_path: Path):
    backend = Backend(
        "sqlite",
        proctor_env(tmp_path / "proctor-home", PROCTOR_LEASE_S="3", DJANGO_SECRET_KEY="x" * 50),
    )
    project, runs_dir = tmp_path / "project", tmp_path / "runs"
    lease_eval(project, runs_dir, cases=CASES, work_s=WORK_S)
    eval_out, serve_out = tmp_path / "eval.out", tmp_path / "serve.out"
    with open(eval_out, "w") as out, open(tmp_path / "eval.err", "w") as err:
        evaluation = subprocess.Popen(
            [PROCTOR, "eval", "--json", "-j", "4"],
            cwd=project,
            env=backend.env,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
        )
    serve = None
    try:
        wait_for(
            lambda: (
                backend.exists()
                and "evals_app_trial" in backend.tables()
                and backend.scalar("SELECT COUNT(*) FROM evals_app_trial WHERE status = 'running'")
                == 4
            ),
            timeout=60,
            what="the eval's first four trials to run",
        )
        with open(serve_out, "w") as out:
            serve = subprocess.Popen(
                [PROCTOR, "serve", f"127.0.0.1:{free_port()}"],
                cwd=project,
                env=backend.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        wait_for(lambda: "Proctor at" in serve_out.read_text(), timeout=30, what="serve to start")
        evaluation.wait(timeout=60)
    finally:
        if evaluation.poll() is None:
            evaluation.kill()
        if serve is not None:
            serve.send_signal(signal.SIGTERM)
            try:
                serve.wait(timeout=20)
            except subprocess.TimeoutExpired:
                serve.kill()
        kill_agents(runs_dir)

    eval_err = (tmp_path / "eval.err").read_text()
    served = serve_out.read_text()
    assert evaluation.returncode == 0, eval_err
    report = json.loads(eval_out.read_text())
    assert [t["status"] for run in report["runs"] for t in run["trials"]] == ["passed"] * CASES
    runs = agent_runs(runs_dir)
    assert len(runs) == CASES
    assert all(len(case_runs) == 1 and case_runs[0].ended for case_runs in runs.values()), runs
    assert backend.scalar("SELECT MAX(attempt) FROM evals_app_trial") == 1
    for output in (eval_err, served):
        assert "IntegrityError" not in output and "Traceback" not in output, output
