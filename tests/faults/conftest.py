"""Fixtures of the fault tests: real `proctor` processes (workers, eval, serve) on a database of
their own, with leases short enough (PROCTOR_LEASE_S) that a lost worker is found in seconds,
and an agent that notes each run of each trial in a file so a trial run twice shows."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import PROCTOR, proctor_env, run_proctor
from e2e.running import Backend, write_eval

AGENTS = Path(__file__).resolve().parent / "agents"
# Its own Redis database: workers of other test modules must not take these tasks.
FAULTS_REDIS_DB = int(os.environ.get("PROCTOR_TEST_FAULTS_REDIS_DB", "14"))
LEASE_S = "2"


def lease_eval(project: Path, runs_dir: Path, *, cases: int, work_s: float) -> None:
    """An eval of ``cases`` one-trial cases whose agent notes its runs in ``runs_dir``."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    names = [f"task-{n}" for n in range(cases)]
    write_eval(
        project,
        "leases.eval.py",
        f"""
        from proctor import case, command, profile, suite, variant

        agent = profile("lease-agent", dir={str(AGENTS)!r},
                        run='bash "$PROCTOR_PROFILE_DIR/lease_agent.sh"',
                        env={{"RUNS_DIR": {str(runs_dir)!r}, "WORK_S": "{work_s}"}})
        s = suite("leases", prompt="{{{{task}}}}", trials=1,
                  cases=[case(name, variables={{"task": name}}, validate=command("true"))
                         for name in {names!r}],
                  variants=[variant("command", profile=agent)])
        """,
    )


@dataclass
class AgentRun:
    pid: int
    started: float
    ended: float | None


def agent_runs(runs_dir: Path) -> dict[str, list[AgentRun]]:
    """Each trial's agent runs (by its case), from the notes the agent wrote."""
    runs: dict[str, list[AgentRun]] = {}
    for log in sorted(runs_dir.glob("*.log")):
        trial_runs: dict[int, AgentRun] = {}
        for line in log.read_text().splitlines():
            what, pid, at = line.split()
            if what == "start":
                trial_runs[int(pid)] = AgentRun(int(pid), float(at), None)
            else:
                trial_runs[int(pid)].ended = float(at)
        runs[log.stem] = sorted(trial_runs.values(), key=lambda run: run.started)
    return runs


def kill_agents(runs_dir: Path) -> None:
    """Agents a killed worker left behind (keeping them from other tests' machines)."""
    for runs in agent_runs(runs_dir).values():
        for run in runs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(run.pid, signal.SIGKILL)


def wait_for(condition: Callable[[], object], *, timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.fixture
def scaled(tmp_path: Path, fresh_postgres_url: str, redis_url: str) -> Backend:
    """PostgreSQL and Redis (a database of its own), migrated, with short leases."""
    import redis

    url = f"{redis_url.rsplit('/', 1)[0]}/{FAULTS_REDIS_DB}"
    redis.Redis.from_url(url).flushdb()
    backend = Backend(
        "postgres",
        proctor_env(
            tmp_path / "proctor-home",
            DATABASE_URL=fresh_postgres_url,
            REDIS_URL=url,
            PROCTOR_LEASE_S=LEASE_S,
            PROCTOR_MAX_ATTEMPTS="2",
        ),
    )
    migrated = run_proctor("migrate", "--no-input", cwd=tmp_path, env=backend.env)
    assert migrated.returncode == 0, migrated.stderr
    return backend


class Workers:
    """Real `proctor worker` processes, each in its own session, stopped at the end."""

    def __init__(self, backend: Backend, folder: Path) -> None:
        self.backend = backend
        self.folder = folder
        self.started: list[tuple[subprocess.Popen, Path]] = []

    def start(self, name: str, *, concurrency: int = 2) -> tuple[subprocess.Popen, Path]:
        log = self.folder / f"{name}.log"
        with open(log, "w") as out:
            worker = subprocess.Popen(
                [PROCTOR, "worker", "-c", str(concurrency), "--loglevel", "info"],
                cwd=self.folder,
                env={**self.backend.env, "PYTHONFAULTHANDLER": "1"},
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.started.append((worker, log))
        wait_for(
            lambda: worker.poll() is not None or " ready." in log.read_text(),
            timeout=60,
            what=f"worker {name} to be ready",
        )
        assert worker.poll() is None, f"worker {name} exited:\n{log.read_text()}"
        return worker, log

    def stop_all(self) -> None:
        for worker, _ in self.started:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker, _ in self.started:
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()


@pytest.fixture
def workers(scaled: Backend, tmp_path: Path) -> Iterator[Workers]:
    started = Workers(scaled, tmp_path)
    try:
        yield started
    finally:
        started.stop_all()


def submit(backend: Backend, project: Path) -> int:
    """Queue the project's batch on the broker (`proctor eval --no-wait`); its id."""
    import json

    result = backend.eval(project, "--json", "--no-wait", timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["batch"]


def trial_page(backend: Backend, trial_id: int, cwd: Path) -> str:
    """The trial page as a member of the organization sees it, rendered by Django's test
    client in a process on the backend's database."""
    script = (
        "import sys, django; django.setup()\n"
        "from django.contrib.auth.models import User\n"
        "from django.test import Client\n"
        "from evals_app.models import Organization\n"
        "user, _ = User.objects.get_or_create(username='fault-alice')\n"
        "Organization.embedded_default().members.add(user)\n"
        "client = Client(); client.force_login(user)\n"
        "sys.stdout.write(client.get(f'/trials/{sys.argv[1]}/').content.decode())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(trial_id)],
        cwd=cwd,
        env={**backend.env, "DJANGO_SETTINGS_MODULE": "proctor.site.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout
