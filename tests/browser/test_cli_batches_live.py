"""A batch that `proctor eval` runs in its own process fills in the pages `proctor serve` shows,
in the embedded mode (SQLite, no Redis): the grid and a trial's page, Artifacts panel included,
change without a reload."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import free_port, proctor_env, run_proctor
from playwright.sync_api import Page, expect

from browser.conftest import (
    EVALS,
    PASSWORD,
    SCREENSHOTS,
    start,
    stop,
    wait_until_serving,
)

pytestmark = pytest.mark.browser

# Each scripted agent takes two seconds, and -j 1 runs the batch's four trials one by one:
# about eight seconds during which the page is open on a running batch.
EVAL_ARGS = ["eval", str(EVALS), "-j", "1"]
# Long enough for the whole batch; the pages must follow it live, not within this much.
WHOLE_BATCH_MS = 60_000


@dataclass
class Embedded:
    url: str
    home: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def embedded(tmp_path_factory) -> Iterator[Embedded]:
    """`proctor serve` on a fresh SQLite home, with alice able to sign in."""
    home = tmp_path_factory.mktemp("cli-live")
    env = proctor_env(home)
    made = run_proctor(
        "createuser", "alice", "--org", "default", "--password", PASSWORD, cwd=home, env=env
    )
    assert made.returncode == 0, made.stderr
    port = free_port()
    server = start(["serve", f"127.0.0.1:{port}"], home=home, env=env, log=home / "serve.log")
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(url, server, home / "serve.log")
        yield Embedded(url=url, home=home, env=env)
    finally:
        stop(server)


@pytest.fixture
def cli_batch(embedded: Embedded) -> Iterator[subprocess.Popen]:
    """`proctor eval` started in another process, as from another terminal."""
    process = start(EVAL_ARGS, home=embedded.home, env=embedded.env, log=embedded.home / "eval.log")
    yield process
    if process.poll() is None:
        stop(process)


def sign_in(page: Page, embedded: Embedded) -> None:
    page.goto(f"{embedded.url}/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{embedded.url}/")


def open_while_running(page: Page, url: str) -> None:
    """Reload ``url`` until it shows a running batch; from then on the page is never reloaded."""
    for _ in range(100):
        page.goto(url)
        status = page.locator("[id^=batch-status-] .badge")
        if status.count() and status.inner_text().strip().lower() == "running":
            return
        page.wait_for_timeout(200)
    raise AssertionError(f"no running batch appeared at {url}")


def test_the_grid_follows_a_cli_batch_without_a_reload(page, embedded, cli_batch):
    sign_in(page, embedded)
    open_while_running(page, f"{embedded.url}/")
    page.evaluate("window.stillTheSamePage = true")

    expect(page.locator("[id^=batch-status-]")).to_contain_text(
        "4/4 trials finished", timeout=WHOLE_BATCH_MS
    )
    expect(page.locator("[id^=batch-status-] .badge")).to_have_text("Finished")
    # Columns: sloppy (fails on purpose), then steady.
    expect(page.locator("td.cell")).to_have_text(["0/1", "1/1", "0/1", "1/1"])
    expect(page.locator("#grid-total")).to_contain_text("50%")
    assert page.evaluate("window.stillTheSamePage") is True
    assert cli_batch.wait(timeout=60) in (0, 1)  # 1: the sloppy agent fails, on purpose
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "grid-cli-batch-live.png"), full_page=True)


def test_a_trial_page_and_its_artifacts_follow_a_cli_batch(page, embedded, cli_batch):
    sign_in(page, embedded)
    open_while_running(page, f"{embedded.url}/")
    # The batch's last trial, still queued: its page is open before anything of it exists.
    queued = page.request.get(f"{embedded.url}/api/trials/?status=queued").json()["results"]
    assert queued, "the CLI batch finished before its trial page could be opened"
    trial_id = max(trial["id"] for trial in queued)
    page.goto(f"{embedded.url}/trials/{trial_id}/")
    artifacts = page.locator("#artifacts")
    expect(artifacts).to_contain_text("No artifacts yet.")
    page.evaluate("window.stillTheSamePage = true")

    expect(page.locator("[id^=trial-summary-] .status").first).to_have_text(
        re.compile(r"Passed|Failed"), timeout=WHOLE_BATCH_MS
    )
    expect(artifacts).to_contain_text("events.jsonl")
    expect(artifacts).to_contain_text("workspace.diff")
    expect(page.locator("#artifact-count")).not_to_have_text("0")
    expect(page.locator(".msg--assistant").first).to_contain_text("Writing the greeting now.")
    assert page.evaluate("window.stillTheSamePage") is True
