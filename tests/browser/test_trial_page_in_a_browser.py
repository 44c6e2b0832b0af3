"""The trial page as a person uses it, in Chromium against the real `proctor serve` (embedded
mode, DEBUG off): step between the trials of a cell, rerun one trial, read a validator whose
line is wider than its panel, land on a styled 404 with a way back, and see the favicon."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import free_port, proctor_env, run_proctor
from playwright.sync_api import Page, expect

from browser.conftest import PASSWORD, start, stop, wait_until_serving

pytestmark = pytest.mark.browser

EVALS = Path(__file__).resolve().parent / "trial_page_evals"


@dataclass
class Served:
    url: str
    trial_ids: list[int]


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    """One cell of two trials, recorded by `proctor eval`, and `proctor serve` on it."""
    home = tmp_path_factory.mktemp("trial-page")
    env = proctor_env(home)
    made = run_proctor(
        "createuser", "alice", "--org", "default", "--password", PASSWORD, cwd=home, env=env
    )
    assert made.returncode == 0, made.stderr
    result = run_proctor("eval", str(EVALS), "--json", cwd=home, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    [run] = json.loads(result.stdout)["runs"]
    port = free_port()
    server = start(["serve", f"127.0.0.1:{port}"], home=home, env=env, log=home / "serve.log")
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(url, server, home / "serve.log")
        yield Served(url=url, trial_ids=[trial["id"] for trial in run["trials"]])
    finally:
        stop(server)


@pytest.fixture
def signed_in(page: Page, served: Served) -> Page:
    page.goto(f"{served.url}/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{served.url}/")
    return page


def test_it_steps_between_the_trials_of_a_cell(signed_in, served):
    page = signed_in
    first, second = served.trial_ids
    page.goto(f"{served.url}/trials/{first}/")
    expect(page.locator(".trial-pager")).to_contain_text("1 of 2")
    expect(page.locator("#previous-trial")).to_have_count(0)

    page.click("#next-trial")
    expect(page).to_have_url(f"{served.url}/trials/{second}/")
    expect(page.locator("h1")).to_contain_text("Trial #2")
    expect(page.locator(".trial-pager")).to_contain_text("2 of 2")
    expect(page.locator("#next-trial")).to_have_count(0)

    page.click("#previous-trial")
    expect(page).to_have_url(f"{served.url}/trials/{first}/")


def test_it_reruns_one_trial_as_a_new_batch(signed_in, served):
    page = signed_in
    page.goto(f"{served.url}/trials/{served.trial_ids[1]}/")

    page.click("#rerun-trial")

    page.wait_for_url(re.compile(r"/batches/\d+/$"))
    expect(page.locator(".page-subtitle")).to_contain_text("rerun of batch #1")
    cell = page.locator("td.cell")
    expect(cell).to_have_count(1)
    # One trial, not the cell's two; it runs in the server and fills in live.
    expect(page.locator("[id^=batch-status-]")).to_contain_text(
        "1/1 trials finished", timeout=30_000
    )
    expect(cell).to_have_text("1/1")


def test_the_validator_source_wraps_instead_of_being_cut_off(signed_in, served):
    page = signed_in
    page.goto(f"{served.url}/trials/{served.trial_ids[0]}/")
    checks = page.locator("[id^=trial-checks-]")
    checks.locator(".check-source > summary").click()
    source = checks.locator(".source-block")
    expect(source).to_contain_text("this is the end of a wide line")

    hidden = source.evaluate("block => block.scrollWidth - block.clientWidth")
    assert hidden <= 1, f"{hidden}px of the source are off to the side of its panel"
    # The end of the long line is on screen, inside the checks card.
    end = source.get_by_text("this is the end of a wide line", exact=False).last.bounding_box()
    card = checks.bounding_box()
    assert end is not None and card is not None
    assert end["x"] + end["width"] <= card["x"] + card["width"] + 1


def test_an_unknown_page_is_a_styled_404_with_a_way_back(signed_in, served):
    page = signed_in
    response = page.goto(f"{served.url}/trials/987654/")

    assert response is not None and response.status == 404
    expect(page.locator("h1")).to_have_text("Nothing here")
    expect(page.locator(".topbar")).to_be_visible()
    page.get_by_role("link", name="Latest results").click()
    expect(page).to_have_url(f"{served.url}/")


def test_pages_carry_a_favicon_the_policy_allows(signed_in, served):
    page = signed_in
    refused: list[str] = []
    page.on("console", lambda message: refused.append(message.text))
    page.goto(f"{served.url}/trials/{served.trial_ids[0]}/")

    href = page.locator("link[rel=icon]").get_attribute("href")
    assert href and href.endswith(".svg")
    icon = page.request.get(f"{served.url}{href}")
    assert icon.ok and icon.headers["content-type"].startswith("image/svg+xml")
    assert "<svg" in icon.text()
    old_name = page.request.get(f"{served.url}/favicon.ico")
    assert old_name.ok and old_name.url.endswith(href)
    assert not [text for text in refused if "Content Security Policy" in text]
