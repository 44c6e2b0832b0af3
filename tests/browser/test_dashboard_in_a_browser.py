"""The dashboard as a person uses it, in Chromium: sign in, read the grid, open a transcript and
the source of the check that graded it, rerun a cell and watch it fill in without a reload."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Locator, Page, expect

from browser.conftest import PASSWORD

pytestmark = pytest.mark.browser


def grid_cell(page: Page, case: str, variant: str) -> Locator:
    """The grid cell of ``case`` under ``variant``, found as a reader finds it: by the row's
    case name and the column's variant name."""
    variants = page.locator(".variant-name").all_inner_texts()
    row = page.locator("tbody tr").filter(has=page.get_by_role("link", name=case, exact=True))
    return row.locator("td.cell").nth(variants.index(variant))


def test_it_signs_in_and_shows_the_grid(page, dashboard, screenshot):
    page.goto(f"{dashboard.url}/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/$"))
    page.fill("#id_username", "alice")
    page.fill("#id_password", "not the password")
    page.click("button[type=submit]")
    expect(page.locator(".form-error")).to_be_visible()
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")

    expect(page.locator(".variant-name")).to_have_text(["sloppy", "steady"])
    expect(grid_cell(page, "greet-ada", "steady")).to_have_text("1/1")
    expect(grid_cell(page, "greet-ada", "sloppy")).to_have_text("0/1")
    expect(page.locator("#grid-total")).to_contain_text("50%")
    screenshot(page, "grid")

    # Filtering by search replaces the grid in place and keeps the address.
    page.fill("#case-search", "politely")
    expect(page.locator(".case-name")).to_have_text(["greet-ada-politely"])
    expect(page).to_have_url(re.compile(r"q=politely"))


def test_it_opens_a_transcript_and_the_validator_source(signed_in, dashboard, screenshot):
    page = signed_in
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    grid_cell(page, "greet-ada-politely", "sloppy").locator("a").click()
    expect(page.locator("h1")).to_contain_text("greet-ada-politely")
    # The run page: the validator's captured source with its message on each trial.
    check = page.locator("#check-0")
    expect(check.locator(".highlight")).to_contain_text("def greets_ada(ctx) -> Verdict:")
    expect(check).to_contain_text("greeting.txt says 'hello ada'")
    expect(check.locator(".score-pill")).to_have_text("0/1 · 0%")

    page.get_by_role("link", name="Transcript →").click()
    expect(page.locator(".msg--user").first).to_contain_text(
        "Write a greeting for Ada into greeting.txt."
    )
    # The agent's HTML is shown as text and runs nothing.
    expect(page.locator(".msg--assistant").first).to_contain_text("<img src=x onerror=alert(1)>")
    command = page.locator(".event--command").filter(has_text="cat greeting.txt").first
    expect(command.locator(".exit")).to_have_text("exit 0")
    command.locator("summary").click()
    expect(command.locator(".output-pre")).to_have_text("hello ada")
    trial_check = page.locator("[id^=trial-checks-] #check-0")
    expect(trial_check).to_contain_text("failed")
    expect(trial_check.locator(".highlight")).to_contain_text("greeting.txt")
    expect(page.locator("#artifacts")).to_contain_text("events.jsonl")
    # The weighted assertions: the score against the case's threshold, and each assertion.
    expect(page.locator("[id^=trial-score-]")).to_contain_text("0.33 / threshold 0.60")
    expect(page.locator("[id^=trial-checks-] #check-1")).to_contain_text("weight 2")
    screenshot(page, "trial")
    assert dialogs == []


def test_it_shows_each_metric_per_variant(signed_in, dashboard, screenshot):
    page = signed_in
    page.get_by_role("link", name="Metrics", exact=True).click()
    expect(page.locator("h1")).to_contain_text(f"of batch #{dashboard.batch_id}")
    expect(page.locator(".variant-name")).to_have_text(["sloppy", "steady"])
    exact = page.locator("tr.metric-row").filter(has_text="exact-greeting")
    expect(exact.locator(".weight-col")).to_have_text("2")
    expect(exact.locator("td.cell .cell-score")).to_have_text(["0%", "100%"])
    latency = page.locator("tr.metric-row").filter(has_text="latency")
    expect(latency.locator(".weight-col")).to_have_text("info only")
    expect(page.locator("#weighted-score td.cell .cell-score")).to_have_text(["0.33", "1.00"])
    expect(page.locator("#met-threshold td.cell .cell-score")).to_have_text(["0/1", "1/1"])
    screenshot(page, "metrics")


def test_it_reruns_a_cell_and_fills_it_in_live(signed_in, dashboard, screenshot):
    page = signed_in
    grid_cell(page, "greet-ada", "steady").locator("a").click()
    page.click("#rerun-run")

    page.wait_for_url(re.compile(r"/batches/\d+/$"))
    assert not page.url.endswith(f"/batches/{dashboard.batch_id}/")
    expect(page.locator(".page-subtitle")).to_contain_text(f"rerun of batch #{dashboard.batch_id}")
    cell = page.locator("td.cell")
    expect(cell).to_have_count(1)
    # The agent takes two seconds: the cell first shows the trial unfinished...
    expect(cell).to_have_class(re.compile(r"cell--pending"))
    page.evaluate("window.stillTheSamePage = true")
    # ...then fills in from the websocket, with no reload.
    expect(cell).to_have_text("1/1", timeout=30_000)
    expect(cell).not_to_have_class(re.compile(r"cell--pending"))
    expect(page.locator("#grid-total")).to_contain_text("100%")
    expect(page.locator("[id^=batch-status-]")).to_contain_text("1/1 trials finished")
    assert page.evaluate("window.stillTheSamePage") is True
    screenshot(page, "grid-after-rerun")
