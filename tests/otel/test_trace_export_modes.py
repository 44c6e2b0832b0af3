"""Every way of running sends the same trace (issue 33): threads (`-j 1`), forked workers
(`-j 2`) and a real Celery worker on PostgreSQL and Redis build their spans from the same
record, so Phoenix receives trees of the same shape from each."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import proctor_env, run_proctor
from e2e.running import Backend, write_eval
from fakes.openai_server import FakeModelServer

from otel.phoenix import phoenix_spans
from otel.test_trace_export import JUDGE_ANSWER, JUDGE_MODEL, TRACED_EVAL

CELERY = str(Path(sys.executable).with_name("celery"))
# Its own Redis database, apart from the other worker tests'.
WORKER_REDIS_DB = 12


@pytest.fixture
def scaled_env(tmp_path: Path, fresh_postgres_url: str, redis_url: str) -> dict[str, str]:
    """A scaled home: PostgreSQL and a Redis database of its own, migrated."""
    import redis

    url = f"{redis_url.rsplit('/', 1)[0]}/{WORKER_REDIS_DB}"
    redis.Redis.from_url(url).flushdb()
    env = proctor_env(tmp_path / "scaled", DATABASE_URL=fresh_postgres_url, REDIS_URL=url)
    migrated = run_proctor("migrate", "--no-input", cwd=tmp_path, env=env)
    assert migrated.returncode == 0, migrated.stderr
    return env


def test_threads_forked_workers_and_a_celery_worker_send_the_same_trace(
    tmp_path: Path, phoenix: str, scaled_env: dict[str, str]
):
    received = {}
    with FakeModelServer() as model:
        model.script(*[JUDGE_ANSWER] * 6)
        for mode, home, args in (
            ("threads", proctor_env(tmp_path / "threads"), ["-j", "1"]),
            ("forked", proctor_env(tmp_path / "forked"), ["-j", "2"]),
        ):
            env, project = run_settings(home, tmp_path, model, phoenix)
            traced_eval(tmp_path / mode, env, *args)
            received[mode] = spans_of(phoenix, project)
        env, project = run_settings(scaled_env, tmp_path, model, phoenix)
        with celery_worker(tmp_path, env):
            traced_eval(tmp_path / "celery", env)
            received["celery"] = spans_of(phoenix, project)

    assert len(received["threads"]) > 10
    assert shape(received["threads"]) == shape(received["forked"]) == shape(received["celery"])


def run_settings(
    home: dict[str, str], tmp_path: Path, model: FakeModelServer, phoenix: str
) -> tuple[dict[str, str], str]:
    """The environment of one run (the command's, and the worker's), and its Phoenix project."""
    project = f"proctor-{uuid.uuid4().hex[:8]}"
    return {
        **home,
        "PROCTOR_LLM_BASE_URL": model.url,
        "PROCTOR_LLM_MODEL": JUDGE_MODEL,
        "SECRET_DROP": str(tmp_path / "secrets.txt"),
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix,
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
        # A long-lived worker sends what waits this often.
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }, project


def traced_eval(folder: Path, env: dict[str, str], *args: str) -> None:
    write_eval(folder, "traced.eval.py", TRACED_EVAL)
    kind = "postgres" if "DATABASE_URL" in env else "sqlite"
    result = Backend(kind, env).eval(folder, "--json", *args, timeout=180)
    assert result.returncode == 0, result.stderr
    assert [t["status"] for t in json.loads(result.stdout)["runs"][0]["trials"]] == ["passed"] * 2


def spans_of(phoenix: str, project: str) -> list[dict]:
    return phoenix_spans(
        phoenix,
        project,
        until=lambda spans: (
            sum(s["name"].startswith("invoke_agent") for s in spans) == 2
            and any(s["name"].startswith("proctor batch") for s in spans)
        ),
    )


def shape(spans: list[dict]) -> list[tuple]:
    """The traces as (span, parent span, attribute names, event names), ids, times and batch
    numbers left out."""
    by_id = {s["context"]["span_id"]: s for s in spans}

    def name(span: dict) -> str:
        return "proctor batch" if span["name"].startswith("proctor batch") else span["name"]

    rows = []
    for span in spans:
        parent = by_id.get(span["parent_id"] or "")
        rows.append(
            (
                name(span),
                name(parent) if parent else None,
                tuple(sorted(k for k in span["attributes"] if not k.startswith("llm."))),
                tuple(e["name"] for e in span["events"]),
            )
        )
    return sorted(rows)


@contextlib.contextmanager
def celery_worker(tmp_path: Path, env: dict[str, str]) -> Iterator[None]:
    """A real Celery worker on the scaled home with the run's settings, stopped afterwards
    (its last spans sent as it stops)."""
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
                f"otel-{uuid.uuid4().hex[:8]}@%h",
            ],  # fmt: skip
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        for _ in range(600):
            if worker.poll() is not None or " ready." in log.read_text():
                break
            time.sleep(0.1)
        assert worker.poll() is None, log.read_text()
        yield
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
