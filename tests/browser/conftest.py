"""Browser tests: Debian's Chromium, driven by Playwright, against the real `proctor serve`.

The server is a subprocess on a free port sharing the test database (SQLite file or PostgreSQL
test database), so pages, websockets and reruns run exactly as in production's embedded mode:
a rerun queues its trials in the server's own worker pool, and their updates reach the browser
through the server's channel layer. The data comes from the real `proctor eval` of
``evals/greetings.eval.py``, committed for the module and flushed afterwards.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from conftest import PROCTOR, REPO, proctor_env, run_proctor, tier_unavailable
from django.db import connection

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


@contextmanager
def database_access(django_db_blocker) -> Iterator[None]:
    """The ORM from this thread, beside Playwright: its sync API keeps an event loop here,
    which makes Django refuse synchronous queries unless told they are safe."""
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with django_db_blocker.unblock():
            yield
    finally:
        if previous is None:
            del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


def database_url(settings_dict: dict) -> str:
    """The URL of the database this test session uses, for the subprocesses to share it."""
    engine, name = settings_dict["ENGINE"], settings_dict["NAME"]
    if engine.endswith("sqlite3"):
        return f"sqlite:///{name}"
    user = quote(settings_dict.get("USER") or "", safe="")
    password = quote(settings_dict.get("PASSWORD") or "", safe="")
    credentials = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgresql://{credentials}{host}:{port}/{name}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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
    mode: str  # "embedded" (nothing configured) or "redis" (REDIS_URL and a worker process)
    batch_id: int
    # run ids by (case slug, variant name)
    runs: dict[tuple[str, str], int]


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


@pytest.fixture(scope="module", params=["embedded", "redis"])
def dashboard(request, django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Dashboard]:
    """`proctor eval` of the greetings evals, alice in its organization, and `proctor serve`:
    alone (the embedded default: reruns run in the server's own pool, updates go through its
    in-memory channel layer), or with REDIS_URL and a `proctor worker` process (the scaled
    mode: reruns go through Celery, updates through channels-redis)."""
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from evals_app.models import Batch, Organization, Run

    home = tmp_path_factory.mktemp(f"browser-{request.param}")
    env = proctor_env(home, DATABASE_URL=database_url(connection.settings_dict))
    with database_access(django_db_blocker):
        evaluated = run_proctor("eval", str(EVALS), "-j", "4", cwd=home, env=env)
        print("DEBUG", env["DATABASE_URL"], evaluated.returncode, evaluated.stdout[-800:], evaluated.stderr[-1500:])
        assert evaluated.returncode in (0, 1), evaluated.stdout + evaluated.stderr
        batch = Batch.objects.latest("created_at")
        alice = User.objects.create_user("alice", password=PASSWORD)
        Organization.objects.get(pk=batch.organization_id).members.add(alice)
        runs = {
            (run.case_version.case.slug, run.variant.name): run.pk
            for run in Run.objects.filter(batch=batch).select_related(
                "case_version__case", "variant"
            )
        }

    processes = []
    if request.param == "redis":
        env = {**env, "REDIS_URL": request.getfixturevalue("redis_url")}
        processes.append(start(["worker", "-c", "2"], home=home, env=env, log=home / "worker.log"))
    port = free_port()
    server = start(["serve", f"127.0.0.1:{port}"], home=home, env=env, log=home / "serve.log")
    processes.append(server)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(url, server, home / "serve.log")
        yield Dashboard(url=url, mode=request.param, batch_id=batch.pk, runs=runs)
    finally:
        for process in processes:
            stop(process)
        with database_access(django_db_blocker):
            call_command("flush", interactive=False, verbosity=0)


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
