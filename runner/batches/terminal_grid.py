"""The case x variant grid `proctor eval` prints, fitted to the terminal it is printed in.

Three shapes, the first that fits whole is printed: the grid with each variant's name over its
column; the grid with short column keys (v1, v2...) and a legend naming each variant in full;
and, where even that is too wide (many variants, long case names), one row per cell. No name
is ever cut: a cut name ("comman…") says nothing about which variant the column is.
"""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

MISSING = "—"


def grid(report: dict, console: Console) -> RenderableType:
    """The report's grid in the first shape that fits ``console``'s width."""
    variants = list(dict.fromkeys(run["variant"] for run in report["runs"]))
    cells = _cells(report)
    title = f"Batch {report['batch']}"
    full = _table(title, cells, variants, {v: escape(v) for v in variants})
    if _fits(full, console):
        return full
    keys = {v: f"v{n}" for n, v in enumerate(variants, start=1)}
    keyed = _table(title, cells, variants, keys)
    if _fits(keyed, console):
        legend = Text("\n".join(f"{keys[v]}  {v}" for v in variants), no_wrap=False)
        return Group(keyed, legend)
    return _cell_rows(title, cells, variants)


def _cells(report: dict) -> dict[tuple[str, str], dict[str, str]]:
    """Each case's marked-up result per variant: passed/trials, coloured, with a mark for a
    time-out or an error."""
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for run in report["runs"]:
        trials = run["trials"]
        passed = sum(1 for t in trials if t["status"] == "passed")
        marks = "".join(
            {"timed_out": " ⏱", "errored": " ⚠"}.get(s, "")
            for s in sorted({t["status"] for t in trials} & {"timed_out", "errored"})
        )
        style = "green" if passed == len(trials) else "red" if passed == 0 else "yellow"
        rows.setdefault((run["suite"], run["case"]), {})[run["variant"]] = (
            f"[{style}]{passed}/{len(trials)}[/]{marks}"
        )
    return rows


def _table(
    title: str,
    cells: dict[tuple[str, str], dict[str, str]],
    variants: list[str],
    headers: dict[str, str],
) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("case", no_wrap=True)
    for variant in variants:
        table.add_column(headers[variant], justify="center", no_wrap=True)
    for (suite, case), row in cells.items():
        table.add_row(escape(f"{suite} / {case}"), *[row.get(v, MISSING) for v in variants])
    return table


def _cell_rows(
    title: str, cells: dict[tuple[str, str], dict[str, str]], variants: list[str]
) -> Table:
    """One row per case and variant that ran: as narrow as a grid gets."""
    table = Table(title=title, title_justify="left")
    table.add_column("case", overflow="fold")
    table.add_column("variant", overflow="fold")
    table.add_column("passed", justify="center", no_wrap=True)
    for (suite, case), row in cells.items():
        label = escape(f"{suite} / {case}")
        for variant in variants:
            if variant in row:
                table.add_row(label, escape(variant), row[variant])
                label = ""
    return table


def _fits(table: Table, console: Console) -> bool:
    """Whether ``table`` prints at its natural width within the console's, nothing wrapped."""
    # Measured against a width it cannot reach, or Rich reports the width it would squeeze to.
    unbounded = console.options.update_width(1_000_000)
    return Measurement.get(console, unbounded, table).maximum <= console.width
