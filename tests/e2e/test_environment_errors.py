"""Settings of the environment that cannot work (a DATABASE_URL naming nothing that answers, or
not a URL at all; a PROCTOR_HOME that cannot hold the database) end a command with one line
naming the setting and exit 2: no traceback, no password echoed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import free_port, proctor_env, run_proctor

from e2e.running import write_quick_eval


def assert_one_line_and_exit_2(done: subprocess.CompletedProcess, said: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and said in lines[0], done.stderr
    assert "hunter2" not in done.stderr + done.stdout


def home_that_is_a_file(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "not-a-folder").write_text("")
    return {"PROCTOR_HOME": str(tmp_path / "not-a-folder")}


def database_that_is_a_folder(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home" / "proctor.sqlite3").mkdir(parents=True)
    return {}


CASES = [
    pytest.param(
        lambda _: {"DATABASE_URL": f"postgresql://proctor:hunter2@127.0.0.1:{free_port()}/ours"},
        "cannot use the database ours at 127.0.0.1:",
        id="nothing answers at DATABASE_URL",
    ),
    pytest.param(
        lambda _: {"DATABASE_URL": "not-a-url"},
        "DATABASE_URL is not a database URL",
        id="DATABASE_URL is no URL",
    ),
    pytest.param(
        # Celery took it for an AMQP host and retried it for ever (a worker), or ended
        # `proctor eval` in kombu's traceback.
        lambda _: {"REDIS_URL": "cache-host:6379"},
        "REDIS_URL is not a Redis URL such as redis://127.0.0.1:6379/0",
        id="REDIS_URL is no Redis URL",
    ),
    pytest.param(home_that_is_a_file, "PROCTOR_HOME", id="PROCTOR_HOME is a file"),
    pytest.param(
        database_that_is_a_folder,
        "cannot use the SQLite database",
        id="the SQLite database cannot be opened",
    ),
]


@pytest.mark.parametrize(("environment", "said"), CASES)
@pytest.mark.parametrize(
    "command",
    [
        ["eval", "quick.eval.py"],
        ["createuser", "alice", "--org", "acme", "--password", "pw-123456"],
        ["seed-demo-data"],
    ],
    ids=["eval", "createuser", "seed-demo-data"],
)
def test_a_setting_that_cannot_work_is_one_line_and_exit_2(
    tmp_path: Path, environment, said: str, command: list[str]
) -> None:
    write_quick_eval(tmp_path)
    env = {**proctor_env(tmp_path / "home"), **environment(tmp_path)}
    done = run_proctor(*command, cwd=tmp_path, env=env, timeout=120)
    assert_one_line_and_exit_2(done, said)
    assert done.stdout == ""


def test_a_worker_says_at_start_that_nothing_answers_at_database_url(
    tmp_path: Path, redis_url: str
) -> None:
    """Before, it started and reported itself ready."""
    env = {
        **proctor_env(tmp_path / "home"),
        "DATABASE_URL": f"postgresql://proctor:hunter2@127.0.0.1:{free_port()}/ours",
        "REDIS_URL": redis_url,
    }
    done = run_proctor("worker", cwd=tmp_path, env=env, timeout=60)
    assert_one_line_and_exit_2(done, "cannot use the database ours")


def test_an_eval_says_in_one_line_that_nothing_answers_at_redis_url(tmp_path: Path) -> None:
    """Before, kombu's traceback once the batch was recorded, its trials never queued."""
    write_quick_eval(tmp_path)
    env = {
        **proctor_env(tmp_path / "home"),
        "REDIS_URL": f"redis://:hunter2@127.0.0.1:{free_port()}/0",
    }
    done = run_proctor("eval", "quick.eval.py", cwd=tmp_path, env=env, timeout=60)
    assert_one_line_and_exit_2(done, "cannot queue trials on Redis at 127.0.0.1:")
    assert "unset REDIS_URL to run the trials in this process" in done.stderr
    batches = run_proctor(
        "shell",
        "-c",
        "from evals_app.models import Batch; print(Batch.objects.count())",
        cwd=tmp_path,
        env=proctor_env(tmp_path / "home"),
        timeout=60,
    )
    assert batches.stdout.strip().splitlines()[-1] == "0", "nothing was recorded"


def test_seed_demo_data_makes_the_tables_of_a_new_home_first(tmp_path: Path) -> None:
    seed = ["seed-demo-data", "--cases", "2", "--variants", "1", "--trials", "1"]
    done = run_proctor(*seed, cwd=tmp_path, env=proctor_env(tmp_path / "home"), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Seeded organization 'demo'" in done.stdout


@pytest.mark.parametrize("command", [["migrate"], ["showmigrations"]])
def test_djangos_own_commands_say_in_one_line_that_nothing_answers(
    tmp_path: Path, command: list[str]
) -> None:
    """Before, Django's traceback; the password stays out of the line as in Proctor's own."""
    env = {
        **proctor_env(tmp_path / "home"),
        "DATABASE_URL": f"postgresql://proctor:hunter2@127.0.0.1:{free_port()}/ours",
    }
    done = run_proctor(*command, cwd=tmp_path, env=env, timeout=60)
    assert_one_line_and_exit_2(done, "proctor: cannot use the database ours at 127.0.0.1:")


def test_a_django_command_whose_database_answers_keeps_its_own_errors(tmp_path: Path) -> None:
    """Only a database that does not answer is said so: here SQLite answers, and the error is
    the statement's own, which Django reports as it always has."""
    done = run_proctor(
        "shell",
        "-c",
        "from django.db import connection; connection.cursor().execute('select * from nowhere')",
        cwd=tmp_path,
        env=proctor_env(tmp_path / "home"),
        timeout=60,
    )
    assert done.returncode != 0
    assert "no such table: nowhere" in done.stderr
    assert "cannot use the" not in done.stderr
