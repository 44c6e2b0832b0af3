"""Two real trials of one case side by side, in Chromium against the real `proctor serve`
(embedded mode): `proctor eval` runs the case under two variants of a scripted agent through
the command harness, and a reader goes from one trial's page to the pair, sees where the two
conversations part, the checks A passed and B failed and the files they left differently, and
unfolds the steps both took alike."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import free_port, proctor_env, run_proctor
from playwright.sync_api import Page, expect

from browser.conftest import PASSWORD, htmx_settled, start, stop, wait_until_serving

pytestmark = pytest.mark.browser

EVALS = Path(__file__).resolve().parent / "side_by_side_evals"


@dataclass
class Served:
    url: str
    careful: int
    hasty: int


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("side-by-side")
    env = proctor_env(home)
    made = run_proctor(
        "createuser", "alice", "--org", "default", "--password", PASSWORD, cwd=home, env=env
    )
    assert made.returncode == 0, made.stderr
    result = run_proctor("eval", str(EVALS), "--json", cwd=home, env=env)
    # hasty fails a check on purpose.
    assert result.returncode in (0, 1), result.stdout + result.stderr
    trials = {run["variant"]: run["trials"][0]["id"] for run in json.loads(result.stdout)["runs"]}
    port = free_port()
    server = start(["serve", f"127.0.0.1:{port}"], home=home, env=env, log=home / "serve.log")
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(url, server, home / "serve.log")
        yield Served(url=url, careful=trials["careful"], hasty=trials["hasty"])
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


def test_a_reader_opens_two_trials_side_by_side_and_finds_where_they_part(signed_in, served):
    page = signed_in
    refused: list[str] = []
    page.on("console", lambda message: refused.append(message.text))
    page.goto(f"{served.url}/trials/{served.careful}/")

    page.click("#compare-trial")
    page.locator(f"#candidate-{served.hasty}").get_by_role("link", name="Side by side").click()

    # A stable address naming both trials.
    expect(page).to_have_url(f"{served.url}/trials/{served.careful}/compare/{served.hasty}/")
    summary = page.locator("#divergence-summary")
    # Eight messages alike, then careful checks its greeting where hasty guesses.
    expect(summary).to_contain_text("First divergence: turn 1, row 9")
    expect(summary).to_contain_text("A ran `cat greeting.txt` (exit 0)")
    expect(summary).to_contain_text("B said “I will guess the greeting.”")

    page.click("#divergence-link")
    expect(page).to_have_url(re.compile(r"#divergence$"))
    mark = page.locator("#divergence")
    expect(mark).to_be_in_viewport()
    row = page.locator("[data-divergence]")
    expect(row).to_have_class(re.compile(r"pair-row--changed"))
    expect(row.locator(".pair-side--a")).to_contain_text("cat greeting.txt")
    expect(row.locator(".pair-side--b")).to_contain_text("I will guess the greeting.")

    # The checks: both wrote a greeting; only careful's is right.
    differing = page.locator(".check-pair--differs")
    expect(differing).to_have_count(1)
    expect(differing).to_contain_text("greeting_is_for_ada")
    expect(differing.locator(".check-result--a")).to_contain_text("passed")
    expect(differing.locator(".check-result--b")).to_contain_text("failed")
    expect(differing.locator(".check-result--b")).to_contain_text("'hello ada'")
    expect(page.locator(".check-pair:not(.check-pair--differs)")).to_contain_text(
        "greeting_is_written"
    )

    # The workspaces: greeting.txt differs, notes.txt is hasty's alone.
    changed = page.locator("#changed-files")
    expect(changed.locator(".changed-file--different")).to_contain_text("greeting.txt")
    expect(changed.locator(".changed-file--different")).to_contain_text("+hello ada")
    expect(changed.locator(".changed-file--only_b")).to_contain_text("notes.txt")

    assert not [text for text in refused if "Content Security Policy" in text]


def test_the_steps_both_took_alike_unfold_on_demand(signed_in, served):
    page = signed_in
    page.goto(f"{served.url}/trials/{served.careful}/compare/{served.hasty}/")
    fold = page.locator("#fold-0-0")
    expect(fold).to_contain_text("5 events the same in both")
    # Three alike beside the divergence, and the last message and the end, alike again.
    expect(page.locator(".pair-row--same")).to_have_count(3 + 2)

    fold.get_by_role("link").click()
    htmx_settled(page)

    expect(fold).to_have_count(0)
    expect(page.locator(".pair-row--same")).to_have_count(8 + 2)
    first = page.locator("#pair-0-0")
    expect(first.locator(".pair-side--a")).to_contain_text("part 1 of 8")
    expect(first.locator(".pair-side--b")).to_contain_text("part 1 of 8")
    # Still the same page: htmx swapped the rows in.
    expect(page).to_have_url(f"{served.url}/trials/{served.careful}/compare/{served.hasty}/")


def test_swapping_sides_keeps_the_pair(signed_in, served):
    page = signed_in
    page.goto(f"{served.url}/trials/{served.careful}/compare/{served.hasty}/")
    page.click("#swap-sides")
    expect(page).to_have_url(f"{served.url}/trials/{served.hasty}/compare/{served.careful}/")
    expect(page.locator("#divergence-summary")).to_contain_text(
        "A said “I will guess the greeting.”"
    )
    expect(page.locator(".changed-file--only_a")).to_contain_text("notes.txt")
