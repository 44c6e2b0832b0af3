"""`proctor eval`'s grid fits the terminal it is printed in, and never cuts a name: the names
over their columns where they fit, short keys with a legend where they do not, one row per
cell where even keys are too wide."""

from __future__ import annotations

import pytest
from rich.console import Console

from runner.batches.terminal_grid import grid

VARIANTS = ["careful", "hasty", "command:claims-only", "command:pr-opener", "command:refunder"]
CASES = [("calc", "fix-add"), ("mock-pull-request", "open-pull-request"), ("notes", "write")]


def report(variants: list[str]) -> dict:
    return {
        "batch": 7,
        "runs": [
            {
                "suite": suite,
                "case": case,
                "variant": variant,
                "trials": [{"status": "passed"}, {"status": "failed" if n % 2 else "passed"}],
            }
            for suite, case in CASES
            for n, variant in enumerate(variants)
        ],
    }


def printed(variants: list[str], width: int) -> str:
    console = Console(width=width, record=True, color_system=None, legacy_windows=False)
    console.print(grid(report(variants), console))
    return console.export_text()


@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_no_name_is_cut_and_nothing_is_wider_than_the_terminal(width: int):
    text = printed(VARIANTS, width)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    for variant in VARIANTS:
        assert variant in text
    for suite, case in CASES:
        # Folded onto a second line at the narrowest, never cut.
        label = f"{suite} / {case}"
        assert label in text or (f"{suite} /" in text and case in text)


def test_the_shape_follows_the_width():
    wide = printed(VARIANTS, 200)
    header = next(line for line in wide.splitlines() if "careful" in line)
    assert all(v in header for v in VARIANTS), "every name over its column"

    keyed = printed(VARIANTS, 90)
    assert "v1" in keyed and "v5" in keyed
    assert "v3  command:claims-only" in keyed.splitlines()

    narrow = printed(VARIANTS, 60)
    rows = [line for line in narrow.splitlines() if "command:refunder" in line]
    assert len(rows) == len(CASES), "one row per case under that variant"
    assert all("2/2" in row for row in rows)
