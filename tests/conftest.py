"""Shared test set-up: the service tiers (PostgreSQL, Redis, Chromium, ...) and running the
real `proctor` command.

A tier whose service is missing is skipped with its reason, and named again at the end of the
run; with PROCTOR_REQUIRE_ALL_TIERS=1 (CI) a missing tier fails instead, so CI runs everything.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parent.parent
PROCTOR = str(Path(sys.executable).with_name("proctor"))
REQUIRE_ALL_TIERS = os.environ.get("PROCTOR_REQUIRE_ALL_TIERS") == "1"
POSTGRES_ADMIN_URL = os.environ.get(
    "PROCTOR_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REDIS_TEST_URL = os.environ.get("PROCTOR_TEST_REDIS", "redis://127.0.0.1:6379/9")

_skipped_tiers: dict[str, str] = {}

# The board of trials the write audit reads (runner.sandboxes.machine_trials) is the machine's:
# another test run's trials on it would count in this run's audits. This run and the `proctor`
# processes it starts (their environment is this one's) share a board of their own.
_TRIAL_BOARD = "PROCTOR_TRIAL_BOARD"
if _TRIAL_BOARD not in os.environ:
    os.environ[_TRIAL_BOARD] = tempfile.mkdtemp(prefix="proctor-tests-trial-board-")


def pytest_unconfigure(config) -> None:
    board = os.environ.get(_TRIAL_BOARD, "")
    if Path(board).name.startswith("proctor-tests-trial-board-"):
        shutil.rmtree(board, ignore_errors=True)


def tier_unavailable(tier: str, reason: str) -> None:
    """Skip this test's tier, or fail it when every tier is required."""
    if REQUIRE_ALL_TIERS:
        pytest.fail(
            f"the {tier} tier is required (PROCTOR_REQUIRE_ALL_TIERS=1) but {reason}", pytrace=False
        )
    _skipped_tiers.setdefault(tier, reason)
    pytest.skip(f"{tier} tier skipped: {reason}")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items: list[pytest.Item]) -> None:
    """Run the browser tier last. Playwright's sync API leaves its event loop marked running
    in the main thread for the rest of the session, and Django then refuses database work
    there (SynchronousOnlyOperation) in every later test. pytest's own reordering by
    parametrized module fixtures would otherwise pull browser modules between others."""
    browser = REPO / "tests" / "browser"
    items.sort(key=lambda item: Path(str(item.path)).is_relative_to(browser))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if _skipped_tiers:
        terminalreporter.section("skipped tiers")
        for tier, reason in sorted(_skipped_tiers.items()):
            terminalreporter.write_line(f"{tier}: {reason}")


# A moment in the middle of a window of every period a rate may name (second, minute, hour,
# day): 12:30:30.5 on a day of 2024.
MID_WINDOW_S = 20_000 * 86_400 + 12 * 3_600 + 30 * 60 + 30.5


@pytest.fixture(autouse=True)
def fresh_rate_limits(monkeypatch) -> Iterator[None]:
    """Each test starts with no reruns counted against its users (the counts live in the
    process's cache, and user ids repeat from test to test), and the limit's clock stands still
    in the middle of a window: the limit counts in fixed windows, so a test's requests that
    straddled a window's end (one in a few dozen runs, more on a busy machine) started afresh
    and were let through."""
    from django.core.cache import cache

    from dashboard import throttling

    monkeypatch.setattr(throttling, "time", SimpleNamespace(time=lambda: MID_WINDOW_S))
    cache.clear()
    yield


# --- PostgreSQL ----------------------------------------------------------------------------------


def _postgres_reason() -> str | None:
    try:
        import psycopg

        psycopg.connect(POSTGRES_ADMIN_URL, connect_timeout=3).close()
    except Exception as exc:
        return f"PostgreSQL is not reachable at {POSTGRES_ADMIN_URL} ({type(exc).__name__})"
    return None


@pytest.fixture(scope="session")
def postgres_admin_url() -> str:
    reason = _postgres_reason()
    if reason:
        tier_unavailable("postgres", reason)
    return POSTGRES_ADMIN_URL


@pytest.fixture
def fresh_postgres_url(postgres_admin_url: str) -> Iterator[str]:
    """A new, empty PostgreSQL database for one test, dropped afterwards."""
    import psycopg

    name = f"proctor_e2e_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = postgres_admin_url.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    with psycopg.connect(postgres_admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- Redis ---------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_url() -> str:
    try:
        import redis

        client = redis.Redis.from_url(REDIS_TEST_URL, socket_connect_timeout=3)
        client.ping()
        client.flushdb()
    except Exception as exc:
        tier_unavailable(
            "redis", f"Redis is not reachable at {REDIS_TEST_URL} ({type(exc).__name__})"
        )
    return REDIS_TEST_URL


# --- running the real command --------------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for a server a test starts)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def proctor_env(home: Path, **extra: str) -> dict[str, str]:
    """A clean environment for a `proctor` subprocess: its own home, no inherited database."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "DATABASE_URL",
            "REDIS_URL",
            "PROCTOR_HOME",
            "PROCTOR_ARTIFACTS_DIR",
            "DJANGO_SETTINGS_MODULE",
        )
    }
    env["PROCTOR_HOME"] = str(home)
    env.update(extra)
    return env


def run_proctor(
    *args: str, cwd: Path, env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PROCTOR, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(params=["sqlite", "postgres"])
def backend_env(request, tmp_path: Path) -> dict[str, str]:
    """The environment of a `proctor` run on each database: the embedded SQLite default, and
    PostgreSQL through DATABASE_URL."""
    home = tmp_path / "proctor-home"
    if request.param == "sqlite":
        return proctor_env(home)
    url = request.getfixturevalue("fresh_postgres_url")
    return proctor_env(home, DATABASE_URL=url)


@pytest.fixture(scope="session")
def git_available() -> None:
    if shutil.which("git") is None:
        tier_unavailable("git", "git is not installed")
