"""Batches, grid filters and compare as a person uses them, in Chromium, against the real
`proctor serve`: two batches recorded by the real `proctor eval` (the second after the agent's
arithmetic was broken), on SQLite and on PostgreSQL (whose search is full-text)."""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import free_port, proctor_env
from playwright.sync_api import Page, expect

from browser.conftest import PASSWORD, htmx_settled, proctor, start, stop, wait_until_serving

pytestmark = pytest.mark.browser

EVALS = Path(__file__).resolve().parent / "compare_evals"


@dataclass
class TwoBatches:
    url: str
    good: int
    broken: int


def _batch_id(output: str) -> int:
    return int(re.search(r'"batch": (\d+)', output).group(1))


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def two_batches(request, tmp_path_factory) -> Iterator[TwoBatches]:
    """`proctor eval --label good`, then the agent broken on add-two and `--label broken`,
    alice made by `proctor createuser`, and `proctor serve` on a free port."""
    root = tmp_path_factory.mktemp(f"compare-{request.param}")
    # The evals sit beside Proctor's home, not in it: nothing under the home is bundled.
    home, evals = root / "home", root / "evals"
    home.mkdir()
    shutil.copytree(EVALS, evals)
    env = proctor_env(home)
    drop_database = None
    if request.param == "postgres":
        import psycopg

        admin_url = request.getfixturevalue("postgres_admin_url")
        name = f"proctor_compare_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

        def drop_database() -> None:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

        env = proctor_env(home, DATABASE_URL=f"{admin_url.rsplit('/', 1)[0]}/{name}")
    server = None
    try:
        good = _batch_id(
            proctor("eval", str(evals), "--label", "good", "--json", home=home, env=env)
        )
        agent = evals / "agents" / "solver" / "solver.sh"
        agent.write_text(agent.read_text().replace("SUM=4", "SUM=5"))
        broken = _batch_id(
            proctor("eval", str(evals), "--label", "broken", "--json", home=home, env=env)
        )
        proctor(
            "createuser", "alice", "--org", "default", "--password", PASSWORD, home=home, env=env
        )
        port = free_port()
        log = home / "serve.log"
        server = start(["serve", f"127.0.0.1:{port}"], home=home, env=env, log=log)
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(url, server, log)
        yield TwoBatches(url=url, good=good, broken=broken)
    finally:
        if server is not None:
            stop(server)
        if drop_database is not None:
            drop_database()


@pytest.fixture
def alice(page: Page, two_batches: TwoBatches) -> Page:
    page.goto(f"{two_batches.url}/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{two_batches.url}/")
    return page


def test_the_batches_page_lists_both_and_filters_by_label(
    alice: Page, two_batches: TwoBatches, screenshot_dir: Path
):
    page = alice
    page.get_by_role("link", name="Batches", exact=True).click()
    rows = page.locator("tr.batch-row")
    expect(rows).to_have_count(2)
    expect(rows.locator(".batch-label")).to_have_text(["broken", "good"])
    expect(page.locator(f"#batch-row-{two_batches.broken}")).to_contain_text("67%")
    expect(page.locator(f"#batch-row-{two_batches.good}")).to_contain_text("100%")
    expect(page.locator(f"#batch-row-{two_batches.broken}")).to_contain_text("3 failed")
    page.screenshot(path=str(screenshot_dir / "batches.png"), full_page=True)

    page.fill("#label-filter", "brok")
    expect(rows).to_have_count(1)
    expect(rows.locator(".batch-label")).to_have_text(["broken"])
    expect(page).to_have_url(re.compile(r"label=brok"))


def test_the_grid_filters_by_status_and_finds_an_answer(
    alice: Page, two_batches: TwoBatches, screenshot_dir: Path
):
    page = alice
    page.goto(f"{two_batches.url}/batches/{two_batches.broken}/")
    cases = page.locator(".case-name")
    expect(cases).to_have_text(["add-two", "count-to-three", "say-hello"])

    htmx_settled(page)
    page.select_option("#status-filter", "failed")
    expect(cases).to_have_text(["add-two"])
    expect(page).to_have_url(re.compile(r"status=failed"))

    htmx_settled(page)
    page.select_option("#status-filter", "")
    expect(cases).to_have_count(3)
    # The word is in the agent's answer only, never in a case name.
    htmx_settled(page)
    page.fill("#case-search", "zeppelin")
    expect(cases).to_have_text(["add-two"])
    expect(page.locator("td.cell--matched")).to_have_count(1)

    # pass@k on demand: add-two ran 3 trials and passed none.
    htmx_settled(page)
    page.fill("#case-search", "")
    expect(cases).to_have_count(3)
    htmx_settled(page)
    page.click("#toggle-estimates")
    expect(page.locator("#estimates-row")).to_contain_text("pass@3")
    add_two = page.locator("tbody tr").filter(has=page.get_by_role("link", name="add-two"))
    expect(add_two.locator("td.cell")).to_contain_text("pass@3 0.00")
    page.screenshot(path=str(screenshot_dir / "grid-analysis.png"), full_page=True)


def test_compare_shows_the_regression_on_top_with_the_headline_and_a_warning(
    alice: Page, two_batches: TwoBatches, screenshot_dir: Path
):
    page = alice
    page.get_by_role("link", name="Batches", exact=True).click()
    page.check(f"#batch-row-{two_batches.good} input[name=a]")
    page.check(f"#batch-row-{two_batches.broken} input[name=b]")
    page.click("#compare-selected")

    expect(page.locator("#headline")).to_have_text(
        "B passes 1 fewer case than A; 1 regression, 1 significant"
    )
    warning = page.locator("#compare-warnings .compare-warning").first
    expect(warning).to_contain_text("Agent digest (profile) differs: solver ran")
    top = page.locator("tr.compare-row").first
    expect(top).to_have_class(re.compile(r"compare-row--regression"))
    expect(top.locator(".case-name")).to_have_text("add-two")
    expect(top.locator(".delta")).to_have_text("−100.0 pp")
    expect(top.locator(".delta-interval")).to_have_text(re.compile(r"^\[−100, −\d+\] pp$"))
    expect(top).to_contain_text("significant")
    expect(page.locator("#variant-summary")).to_contain_text("exact McNemar")
    page.screenshot(path=str(screenshot_dir / "compare.png"), full_page=True)


def test_the_case_page_charts_the_drop(alice: Page, two_batches: TwoBatches):
    page = alice
    page.goto(f"{two_batches.url}/batches/{two_batches.broken}/")
    page.get_by_role("link", name="add-two", exact=True).click()
    chart = page.locator("#trend-chart")
    expect(chart).to_be_visible()
    expect(chart.locator(".trend-series")).to_have_count(1)
    expect(chart.locator("circle")).to_have_count(2)


@pytest.fixture
def screenshot_dir() -> Path:
    from conftest import REPO

    path = REPO / "test-artifacts" / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path
