"""The Content-Security-Policy in Chromium: the pages, their htmx and websocket updates, and the
API docs page (Swagger UI from drf-spectacular-sidecar) work under it, with no violation."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


@pytest.fixture
def violations(signed_in) -> list[str]:
    """Every CSP violation Chromium reports on the signed-in page, from now on."""
    found: list[str] = []
    signed_in.on(
        "console",
        lambda message: (
            found.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    return found


def test_the_dashboard_pages_run_under_the_policy(signed_in, dashboard, violations):
    page = signed_in
    response = page.goto(f"{dashboard.url}/batches/{dashboard.batch_id}/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    expect(page.locator(".variant-name")).to_have_count(2)
    # htmx runs: filtering replaces the grid in place.
    page.fill("#case-search", "politely")
    expect(page.locator(".case-name")).to_have_text(["greet-ada-politely"])
    page.locator("td.cell a").first.click()
    expect(page.locator("h1")).to_contain_text("greet-ada-politely")
    page.goto(f"{dashboard.url}/batches/{dashboard.batch_id}/metrics/")
    expect(page.locator("h1")).to_be_visible()

    assert violations == []


def test_the_api_docs_page_renders_under_the_policy(signed_in, dashboard, violations):
    page = signed_in
    response = page.goto(f"{dashboard.url}/api/docs/")
    assert "script-src 'self'" in response.headers["content-security-policy"]

    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Proctor API")
    expect(page.locator(".opblock-tag").first).to_be_visible()

    assert violations == []
