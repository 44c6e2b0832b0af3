"""The scaled path: `proctor eval` with REDIS_URL queues every trial on the broker, a real
Celery worker runs them against PostgreSQL, and the command waits for and prints the results."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import proctor_env, run_proctor
from process_state import running

from e2e.running import Backend, agent_profile, write_eval

CELERY = str(Path(sys.executable).with_name("celery"))
# Its own Redis database: a worker of another test run on the shared one must not take these tasks.
WORKER_REDIS_DB = 13

SCALED_EVAL = f"""
from proctor import case, command, profile, suite, variant

s = suite("scaled", prompt="Fix the total", trials=2,
          cases=[case("fixed", validate=command("grep -q 'total = 6' total.ts")),
                 case("not-fixed", validate=command("grep -q 'total = 7' total.ts"))],
          variants=[variant("command", profile={agent_profile("echo_agent.sh", name="echo")})])
"""


@pytest.fixture
def scaled_backend(tmp_path: Path, fresh_postgres_url: str, redis_url: str) -> Backend:
    import redis

    url = f"{redis_url.rsplit('/', 1)[0]}/{WORKER_REDIS_DB}"
    redis.Redis.from_url(url).flushdb()
    backend = Backend(
        "postgres",
        proctor_env(tmp_path / "proctor-home", DATABASE_URL=fresh_postgres_url, REDIS_URL=url),
    )
    migrated = run_proctor("migrate", "--no-input", cwd=tmp_path, env=backend.env)
    assert migrated.returncode == 0, migrated.stderr
    return backend


@pytest.fixture
def worker_log(scaled_backend: Backend, tmp_path: Path) -> Iterator[Path]:
    """A real `celery -A proctor.site worker` on the test's broker and database, stopped
    afterwards."""
    log = tmp_path / "worker.log"
    with open(log, "w") as out:
        worker = subprocess.Popen(
            [
                CELERY,
                "-A",
                "proctor.site",
                "worker",
                "--pool",
                "threads",
                "-c",
                "2",
                "--loglevel",
                "info",
                "--without-gossip",
                "--without-mingle",
                "-n",
                f"e2e-{uuid.uuid4().hex[:8]}@%h",
            ],
            cwd=tmp_path,
            env=scaled_backend.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        # Wait for the worker to say it is ready (or to die), so its log is complete.
        for _ in range(600):
            if worker.poll() is not None or " ready." in log.read_text():
                break
            time.sleep(0.1)
        assert worker.poll() is None, f"the worker exited:\n{log.read_text()}"
        yield log
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()


def test_a_real_worker_runs_the_queued_trials(
    scaled_backend: Backend, worker_log: Path, tmp_path: Path
):
    project = tmp_path / "project"
    write_eval(project, "scaled.eval.py", SCALED_EVAL)

    # Four trials of an echo agent take seconds; two minutes mean they never reached the worker.
    report = scaled_backend.eval_json(project, timeout=120)

    statuses = {run["case"]: [t["status"] for t in run["trials"]] for run in report["runs"]}
    assert statuses == {"fixed": ["passed", "passed"], "not-fixed": ["failed", "failed"]}
    trial_ids = scaled_backend.trial_ids(report["batch"])
    log = worker_log.read_text()
    received = re.findall(r"Task proctor\.run_trial\[[0-9a-f-]+\] received", log)
    succeeded = re.findall(r"Task proctor\.run_trial\[[0-9a-f-]+\] succeeded", log)
    assert len(received) == len(succeeded) == len(trial_ids) == 4, log
    assert (
        scaled_backend.scalar("SELECT status FROM evals_app_batch WHERE id = ?", report["batch"])
        == "finished"
    )
    assert (
        scaled_backend.artifacts / "batches" / str(report["batch"]) / "benchmark.json"
    ).is_file()


# Embedded mode runs the same Celery task in a local thread pool. Binding a task to its app reads
# strict_typing after marking the task bound and before giving it its request stack; the pause
# below only widens that window, so the race it exposes shows on every run instead of sometimes.
FIRST_TRIALS_AT_ONCE = """
import time

import django

django.setup()
from proctor.site.celery import app


class SlowToType(type(app)):
    @property
    def strict_typing(self):
        time.sleep(0.3)
        return True


app.__class__ = SlowToType
import runner.jobs.execution

runner.jobs.execution.run_trial_by_id = lambda trial_id, start=None: "passed"
from runner.jobs import dispatch

dispatch.configure_local_workers(4)
futures = dispatch.enqueue([1, 2, 3, 4])
print([repr(f.exception()) for f in futures if f.exception()])
"""


def test_the_first_trials_started_at_once_all_run_in_embedded_mode(tmp_path: Path):
    env = proctor_env(tmp_path / "proctor-home", DJANGO_SETTINGS_MODULE="proctor.site.settings")

    result = subprocess.run(
        [sys.executable, "-c", FIRST_TRIALS_AT_ONCE],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_budget_stops_the_batch_on_the_worker_and_leaves_nothing_running(
    scaled_backend: Backend, worker_log: Path, tmp_path: Path
):
    # Loaded here: the budget's own module holds the billed agent and its helpers.
    from e2e.test_budget import processes_running_from, project, statuses

    folder = project(tmp_path)

    shown = scaled_backend.eval(folder, "--max-cost", "0.50", timeout=180)

    assert shown.returncode == 0, shown.stderr
    batch = int(shown.stderr.split("Batch ", 1)[1].split(":", 1)[0])
    # The worker's two threads: one runs the slow trial, the other three $0.20 trials, and
    # the third stops the batch: the slow one is stopped, the three left never start.
    assert statuses(scaled_backend, batch) == {
        "slow": ["budget_exhausted"],
        "costly": ["passed"] * 3 + ["budget_exhausted"] * 3,
    }
    assert f"Batch {batch} stopped: budget reached at $0.6000 (cap $0.5000)" in shown.stdout
    agent_pid = int((tmp_path / "pids" / "agent").read_text())
    child_pid = int((tmp_path / "pids" / "child").read_text())
    # The worker ends the stopped agent's processes by its next heartbeat at the latest.
    for _ in range(300):
        if not (
            running(agent_pid) or running(child_pid) or processes_running_from(tmp_path / "agent")
        ):
            break
        time.sleep(0.1)
    assert not running(agent_pid) and not running(child_pid)
    assert processes_running_from(tmp_path / "agent") == []
    assert (
        scaled_backend.scalar(
            "SELECT COUNT(*) FROM evals_app_trial WHERE status IN ('queued', 'running')"
        )
        == 0
    )
