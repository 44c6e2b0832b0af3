"""`proctor serve` (the embedded mode) stopped with SIGTERM while reruns are queued in its
pool: queued trials stay ``queued`` (never ``errored``, no empty snapshot folder), running ones
finish or are handed back, the process exits without waiting for the queued ones (it once
waited 13 to 30 s on threads; the ceiling here only guards against hanging), and the next
`serve` runs every trial to ``passed``."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import requests
from conftest import PROCTOR, free_port, proctor_env, run_proctor
from e2e.running import Backend

from faults.conftest import kill_agents, lease_eval, wait_for

CASES = 6
WORK_S = 3
PASSWORD = "a long enough password 7"
# Only a hang takes this long to exit after SIGTERM.
EXIT_CEILING_S = 120


def _serve(backend: Backend, project: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    with open(log, "w") as out:
        serve = subprocess.Popen(
            [PROCTOR, "serve", f"127.0.0.1:{port}"],
            cwd=project,
            env=backend.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    wait_for(lambda: "Proctor at" in log.read_text(), timeout=30, what="serve to start")
    return serve, f"http://127.0.0.1:{port}"


def _logged_in(url: str) -> requests.Session:
    session = requests.Session()
    page = session.get(f"{url}/login/", timeout=10).text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = session.post(
        f"{url}/login/",
        data={"username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": token},
        timeout=10,
    )
    assert response.ok and "sessionid" in session.cookies, response.text[:500]
    return session


def _statuses(backend: Backend, batch: int) -> list[str]:
    return [
        row[0]
        for row in backend.rows(
            "SELECT t.status FROM evals_app_trial t JOIN evals_app_run r ON t.run_id = r.id "
            "WHERE r.batch_id = ? ORDER BY t.id",
            batch,
        )
    ]


def test_a_stopped_serve_leaves_queued_reruns_queued_and_exits_promptly(tmp_path: Path):
    backend = Backend(
        "sqlite",
        proctor_env(tmp_path / "proctor-home", PROCTOR_LEASE_S="3", DJANGO_SECRET_KEY="x" * 50),
    )
    project, runs_dir = tmp_path / "project", tmp_path / "runs"
    lease_eval(project, runs_dir, cases=CASES, work_s=WORK_S)
    first = run_proctor("eval", "--json", "-j", str(CASES), cwd=project, env=backend.env)
    assert first.returncode == 0, first.stderr
    created = run_proctor(
        "createuser",
        "alice",
        "--org",
        "default",
        "--password",
        PASSWORD,
        cwd=project,
        env=backend.env,
    )
    assert created.returncode == 0, created.stderr
    source = backend.scalar("SELECT MAX(id) FROM evals_app_batch")

    serve, url = _serve(backend, project, tmp_path / "serve.log")
    try:
        session = _logged_in(url)
        response = session.post(
            f"{url}/batches/{source}/rerun/",
            headers={"X-CSRFToken": session.cookies["csrftoken"], "Referer": url + "/"},
            timeout=10,
        )
        assert response.status_code < 400, response.text[:500]
        rerun = backend.scalar("SELECT MAX(id) FROM evals_app_batch")
        assert rerun != source
        # serve's pool runs as many trials as this machine has CPUs; the rest wait in it.
        wait_for(
            lambda: "running" in _statuses(backend, rerun), timeout=30, what="a rerun to start"
        )
        assert "queued" in _statuses(backend, rerun), "some reruns are still queued in the pool"
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=EXIT_CEILING_S)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        kill_agents(runs_dir)

    served = (tmp_path / "serve.log").read_text()
    assert serve.returncode == 0, served
    after_stop = _statuses(backend, rerun)
    assert "errored" not in after_stop and "running" not in after_stop, (after_stop, served)
    assert "queued" in after_stop
    assert "Traceback" not in served, served
    snapshots = backend.artifacts / "batches" / str(rerun) / "trials"
    queued = backend.rows(
        "SELECT t.id FROM evals_app_trial t JOIN evals_app_run r ON t.run_id = r.id "
        "WHERE r.batch_id = ? AND t.status = 'queued'",
        rerun,
    )
    assert not [i for (i,) in queued if (snapshots / str(i)).exists()], "queued: no folder"

    serve, _url = _serve(backend, project, tmp_path / "serve-again.log")
    try:
        wait_for(
            lambda: _statuses(backend, rerun) == ["passed"] * CASES,
            timeout=90,
            what="the next serve to run every rerun",
        )
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=EXIT_CEILING_S)
        except subprocess.TimeoutExpired:
            serve.kill()
        kill_agents(runs_dir)
    assert backend.scalar("SELECT MAX(attempt) FROM evals_app_trial") == 1
