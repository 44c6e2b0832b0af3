"""Variant against variant as a person reads it, in Chromium, against the real `proctor serve`:
one batch recorded by the real `proctor eval` with two variants of a scripted agent (solver
answers all six cases, sloppy gets the three sums wrong), two trials each. The grid loads the
summary under its table; its Variants button opens the page with the cases by difference. Its
Label trials button opens the labelling queue, worked with the keyboard."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import free_port, proctor_env
from playwright.sync_api import Page, expect

from browser.conftest import PASSWORD, htmx_settled, proctor, start, stop, wait_until_serving

pytestmark = pytest.mark.browser

EVALS = Path(__file__).resolve().parent / "variant_evals"


@dataclass
class Served:
    url: str
    batch: int


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("variants")
    home, evals = root / "home", root / "evals"
    home.mkdir()
    shutil.copytree(EVALS, evals)
    env = proctor_env(home)
    output = proctor("eval", str(evals), "--json", home=home, env=env)
    batch = int(re.search(r'"batch": (\d+)', output).group(1))
    proctor("createuser", "alice", "--org", "default", "--password", PASSWORD, home=home, env=env)
    port = free_port()
    log = home / "serve.log"
    server = start(["serve", f"127.0.0.1:{port}"], home=home, env=env, log=log)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(url, server, log)
        yield Served(url=url, batch=batch)
    finally:
        stop(server)


@pytest.fixture
def alice(page: Page, served: Served) -> Page:
    page.goto(f"{served.url}/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{served.url}/")
    return page


HEADLINE = (
    "solver beats sloppy by 50.0 points over 6 shared cases "
    "(95% interval +6.2 to +93.8 for solver − sloppy): the difference holds."
)


def test_the_grid_shows_which_variant_wins_and_whether_it_holds(alice: Page, served: Served):
    page = alice
    page.goto(f"{served.url}/batches/{served.batch}/")
    summary = page.locator("#variant-against-variant")
    # Loaded after the grid, by htmx.
    expect(summary.locator("#variants-headline")).to_have_text(HEADLINE)
    sloppy = summary.locator('tr.variant-estimate[data-variant="sloppy"]')
    expect(sloppy).to_contain_text("50%")
    expect(sloppy).to_contain_text("[6%, 94%]")
    pair = summary.locator("tr.variant-pair")
    expect(pair.locator(".delta")).to_have_text("+50.0 pp")
    expect(pair.locator(".delta-interval")).to_have_text("[+6, +94] pp")
    expect(pair.locator(".pair-holds")).to_have_text("holds")
    expect(pair).to_contain_text("p = 0.250")
    expect(pair.locator(".pair-mdd")).to_have_text("62.6 pp")


def test_the_variants_page_sorts_cases_and_plans_a_difference(
    alice: Page, served: Served, screenshot_dir: Path
):
    page = alice
    page.goto(f"{served.url}/batches/{served.batch}/")
    page.click("#compare-variants")
    expect(page.locator("#variants-headline")).to_have_text(HEADLINE)
    names = page.locator("#pair-cases-1 tr.pair-case .case-name")
    expect(names).to_have_text(
        ["word-bye", "word-hello", "word-yes", "sum-four", "sum-nine", "sum-seven"]
    )
    expect(page.locator("#pair-cases-1 tr.pair-case").last).to_contain_text("pass@2 0.00")

    # The same pair the other way round, planning for 70 points.
    page.select_option("#variant-a", "solver")
    page.select_option("#variant-b", "sloppy")
    page.fill("#difference", "70")
    page.click("#variant-form button[type=submit]")
    htmx_settled(page)
    pair = page.locator("tr.variant-pair")
    expect(pair).to_have_attribute("data-pair", "solver→sloppy")
    # Told from the winner's side whichever way round the pair is asked for.
    expect(page.locator("#variants-headline")).to_have_text(HEADLINE)
    expect(pair.locator(".delta")).to_have_text("−50.0 pp")
    expect(pair.locator(".pair-plan")).to_have_text("6 cases × 2 trials already find 70 points")
    page.screenshot(path=str(screenshot_dir / "variant-compare.png"), full_page=True)


def test_the_labelling_queue_is_worked_with_the_keyboard(
    alice: Page, served: Served, screenshot_dir: Path
):
    page = alice
    page.goto(f"{served.url}/batches/{served.batch}/")
    page.click("#label-trials")
    progress = page.locator("#label-progress")
    expect(progress).to_contain_text("0 of 24 finished trials labelled")
    first = page.locator("[data-trial]").get_attribute("data-trial")
    # n to write a note, Esc to leave it, p to label passed: the next trial comes up.
    page.keyboard.press("n")
    expect(page.locator("#label-note")).to_be_focused()
    page.keyboard.type("says 4, as asked")
    page.keyboard.press("Escape")
    page.keyboard.press("p")
    expect(progress).to_contain_text("1 of 24 finished trials labelled")
    second = page.locator("[data-trial]").get_attribute("data-trial")
    assert second != first
    page.keyboard.press("f")
    expect(progress).to_contain_text("2 of 24 finished trials labelled")
    third = page.locator("[data-trial]").get_attribute("data-trial")
    page.keyboard.press("s")
    expect(progress).to_contain_text("1 skipped")
    assert page.locator("[data-trial]").get_attribute("data-trial") != third
    page.screenshot(path=str(screenshot_dir / "labelling-queue.png"), full_page=True)

    page.goto(f"{served.url}/trials/{first}/")
    expect(page.locator("#current-label")).to_contain_text("Labelled passed by alice")
    expect(page.locator("#current-label")).to_contain_text("says 4, as asked")
    page.goto(f"{served.url}/trials/{second}/")
    expect(page.locator("#current-label .label-verdict")).to_have_text("failed")
    # On the trial page the buttons label in place.
    htmx_settled(page)
    page.click("#label-passed")
    expect(page.locator("#current-label .label-verdict")).to_have_text("passed")


@pytest.fixture
def screenshot_dir() -> Path:
    from conftest import REPO

    path = REPO / "test-artifacts" / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path
