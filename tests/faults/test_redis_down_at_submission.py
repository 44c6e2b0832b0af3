"""Redis down while a batch is submitted to a scaled server (`proctor eval --server`): the
submission is still answered (never a 500), its trials wait in the outbox as ``queued``, and
once Redis is back the reaper of `proctor serve` sends them; a worker runs each exactly once.

A real redis-server of the test's own, on its own port, is killed and started again; the server
is a real `proctor serve` on a PostgreSQL database of its own."""

from __future__ import annotations

import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import PROCTOR, free_port, proctor_env, run_proctor, tier_unavailable
from e2e.running import Backend
from private_redis import RedisServer

from faults.conftest import agent_runs, kill_agents, lease_eval, wait_for

CASES = 3


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        tier_unavailable("redis", "redis-server is not installed")
    server = RedisServer(free_port())
    server.start()
    try:
        yield server
    finally:
        server.kill()


def _start(argv: list[str], *, cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_trials_submitted_while_redis_is_down_run_once_when_it_is_back(
    tmp_path: Path, fresh_postgres_url: str, redis_server: RedisServer
) -> None:
    env = proctor_env(
        tmp_path / "server-home",
        DATABASE_URL=fresh_postgres_url,
        REDIS_URL=f"redis://127.0.0.1:{redis_server.port}/0",
        PROCTOR_LEASE_S="2",
        DJANGO_SECRET_KEY="x" * 50,
    )
    backend = Backend("postgres", env)
    assert run_proctor("migrate", "--no-input", cwd=tmp_path, env=env).returncode == 0
    made = run_proctor(
        "createuser",
        "alice",
        "--org",
        "acme",
        "--password",
        "a-long-password",
        cwd=tmp_path,
        env=env,
    )
    assert made.returncode == 0, made.stderr
    token = run_proctor("createtoken", "alice", cwd=tmp_path, env=env).stdout.strip()
    project, runs_dir = tmp_path / "project", tmp_path / "runs"
    lease_eval(project, runs_dir, cases=CASES, work_s=0.2)

    url = f"http://127.0.0.1:{free_port()}"
    serve_log = tmp_path / "serve.log"
    serve = _start(
        [PROCTOR, "serve", url.removeprefix("http://")], cwd=tmp_path, env=env, log=serve_log
    )
    worker = None
    try:
        wait_for(lambda: "Proctor at" in serve_log.read_text(), timeout=60, what="serve")
        redis_server.kill()
        # The submitter waits for the batch; it is answered, then the trials wait for Redis.
        client = subprocess.Popen(
            [PROCTOR, "eval", "--server", url, "--token", token],
            cwd=project,
            env=proctor_env(tmp_path / "client-home", HOME=str(tmp_path)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        wait_for(
            lambda: (
                backend.scalar("SELECT COUNT(*) FROM evals_app_unsenttrial") == CASES
                or client.poll() is not None
            ),
            timeout=120,
            what="the submission to be recorded with its trials in the outbox",
        )
        assert client.poll() is None, client.communicate()
        assert backend.rows("SELECT status FROM evals_app_trial") == [("queued",)] * CASES
        assert "Internal Server Error" not in serve_log.read_text()

        redis_server.start()
        worker = _start(
            [PROCTOR, "worker", "-c", "2"], cwd=tmp_path, env=env, log=tmp_path / "worker.log"
        )
        out, err = client.communicate(timeout=300)
        assert client.returncode == 0, err
    finally:
        if worker is not None:
            _stop(worker)
        _stop(serve)
        kill_agents(runs_dir)

    assert backend.rows("SELECT status FROM evals_app_trial") == [("passed",)] * CASES
    assert backend.scalar("SELECT COUNT(*) FROM evals_app_unsenttrial") == 0
    runs = agent_runs(runs_dir)
    assert len(runs) == CASES
    assert all(len(case_runs) == 1 for case_runs in runs.values()), runs
    assert backend.scalar("SELECT MAX(attempt) FROM evals_app_trial") == 1
    served = serve_log.read_text()
    assert "Traceback" not in served, served[-3000:]
