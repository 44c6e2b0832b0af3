"""Reading back what Phoenix received, through its REST API."""

from __future__ import annotations

import time

import httpx


def phoenix_spans(url: str, project: str, *, until, timeout_s: float = 30) -> list[dict]:
    """Every span Phoenix holds for ``project``, once ``until(spans)`` holds (spans arrive in the
    background; Phoenix writes them a moment after it received them)."""
    deadline = time.monotonic() + timeout_s
    spans: list[dict] = []
    while True:
        spans = []
        cursor = None
        answer = httpx.get(f"{url}/v1/projects", timeout=10).json()
        if any(p["name"] == project for p in answer["data"]):
            while True:
                params = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
                page = httpx.get(
                    f"{url}/v1/projects/{project}/spans", params=params, timeout=10
                ).json()
                spans += page["data"]
                cursor = page.get("next_cursor")
                if not cursor:
                    break
        if until(spans) or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)
