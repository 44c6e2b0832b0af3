"""Browser tests: Debian's Chromium, driven by Playwright, against the real `proctor serve`.

Each mode gets its own database and processes, filled by the real `proctor eval` of
``evals/greetings.eval.py``, so pages, websockets and reruns run exactly as a person runs them:

- embedded: nothing configured (SQLite under a fresh PROCTOR_HOME); a rerun runs in the
  server's own worker pool and its updates go through the server's in-memory channel layer;
- scaled: a fresh PostgreSQL database, REDIS_URL, and a `proctor worker` process; a rerun goes
  through Celery, its updates through channels-redis.

The test process never opens these databases itself: it reads them through the pages.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import PROCTOR, REPO, free_port, proctor_env, run_proctor, tier_unavailable

CHROMIUM = Path("/usr/bin/chromium")
EVALS = Path(__file__).resolve().parent / "evals"
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
PASSWORD = "correct-horse-battery"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    if not CHROMIUM.exists():
        tier_unavailable("browser", f"{CHROMIUM} is missing (apt-get install chromium)")
    return {
        **browser_type_launch_args,
        "executable_path": str(CHROMIUM),
        "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    }


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict) -> dict:
    return {**browser_context_args, "viewport": {"width": 1440, "height": 900}}


def htmx_settled(page) -> None:
    """Wait until htmx has no request in flight and has wired what it last swapped in. A swap
    that replaces the element which sent it (the grid's filter form is part of the grid) wires
    the new one only when it settles, 20 ms later: a choice made by the test within those
    milliseconds, which no person makes, went to an element htmx did not listen to yet."""
    page.wait_for_function(
        "() => document.readyState === 'complete' && window.htmx !== undefined"
        " && !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"
    )


def wait_until_serving(url: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"proctor serve exited {server.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/login/", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"proctor serve did not answer within 60 s:\n{log.read_text()}")


@dataclass
class Dashboard:
    url: str
    mode: str  # "embedded" or "scaled"
    batch_id: int


def start(args: list[str], *, home: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("w") as output:
        return subprocess.Popen(
            [PROCTOR, *args],
            cwd=home,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def proctor(*args: str, home: Path, env: dict[str, str]) -> str:
    result = run_proctor(*args, cwd=home, env=env)
    # `eval` exits 1 when a trial failed, which the greetings evals do on purpose.
    assert result.returncode in (0, 1), f"proctor {args[0]}: {result.stdout}{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module", params=["embedded", "scaled"])
def dashboard(request, tmp_path_factory) -> Iterator[Dashboard]:
    """The greetings evals recorded by `proctor eval`, alice made by `proctor createuser`, and
    `proctor serve` (plus `proctor worker` when scaled) on a free port."""
    mode = request.param
    home = tmp_path_factory.mktemp(f"browser-{mode}")
    env = proctor_env(home)
    drop_database = None
    if mode == "scaled":
        import psycopg

        admin_url = request.getfixturevalue("postgres_admin_url")
        redis_url = request.getfixturevalue("redis_url")
        name = f"proctor_browser_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

        def drop_database() -> None:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

        env = proctor_env(home, DATABASE_URL=f"{admin_url.rsplit('/', 1)[0]}/{name}")

    processes: list[subprocess.Popen] = []
    try:
        # The first batch runs in the eval's own process, in both modes.
        batch_id = json.loads(proctor("eval", str(EVALS), "-j", "4", "--json", home=home, env=env))[
            "batch"
        ]
        proctor(
            "createuser", "alice", "--org", "default", "--password", PASSWORD, home=home, env=env
        )
        if mode == "scaled":
            env = {**env, "REDIS_URL": redis_url}
            processes.append(
                start(["worker", "-c", "2"], home=home, env=env, log=home / "worker.log")
            )
        port = free_port()
        server = start(["serve", f"127.0.0.1:{port}"], home=home, env=env, log=home / "serve.log")
        processes.append(server)
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(url, server, home / "serve.log")
        yield Dashboard(url=url, mode=mode, batch_id=batch_id)
    finally:
        for process in processes:
            stop(process)
        if drop_database is not None:
            drop_database()


@pytest.fixture
def signed_in(page, dashboard: Dashboard):
    """A page signed in as alice through the sign-in form."""
    page.goto(f"{dashboard.url}/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{dashboard.url}/")
    return page


@pytest.fixture
def screenshot(dashboard: Dashboard):
    """Saves a full-page screenshot as test-artifacts/screenshots/<name>[-redis].png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    suffix = "" if dashboard.mode == "embedded" else f"-{dashboard.mode}"

    def save(page, name: str) -> Path:
        path = SCREENSHOTS / f"{name}{suffix}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save
