"""A comparison (evals_app.comparison) printed in the terminal with rich: the headline, the
comparability warnings, the cells (regressions first) and the per-variant paired test. Shared
by ``proctor compare`` and ``proctor eval --baseline``."""

from __future__ import annotations

from django.conf import settings
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from evals_app.comparison import CellComparison, CellSide, Comparison
from evals_app.cost import format_usd


def comparison_url(comparison: Comparison) -> str:
    """The dashboard's compare page for the two batches."""
    return f"{settings.PROCTOR_DASHBOARD_URL}/compare/?a={comparison.a.pk}&b={comparison.b.pk}"


def _batch_name(batch) -> str:
    return f"batch {batch.pk}" + (f" ({batch.label})" if batch.label else "")


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _rate(rate: float | None, interval: tuple[float, float]) -> str:
    return f"{_percent(rate)} [dim][{interval[0]:.0%}–{interval[1]:.0%}][/]"


def _side(side: CellSide | None) -> str:
    if side is None:
        return "[dim]not run[/]"
    low, high = side.interval
    return (
        f"{side.tally.passed}/{side.tally.finished} {_percent(side.rate)} "
        f"[dim][{low:.0%}–{high:.0%}][/]"
    )


def _delta(cell: CellComparison) -> str:
    if cell.delta is None or cell.delta_interval is None:
        return "—"
    low, high = cell.delta_interval
    style = "red" if cell.regression else "green" if cell.improvement else "dim"
    return f"[{style}]{cell.delta:+.0%}[/] [dim][{low:+.0%}, {high:+.0%}][/]"


PIPED_WIDTH = 150

_CHANGE = {
    "regression": "[red]regression[/]",
    "improvement": "[green]improvement[/]",
    "same": "[dim]same[/]",
    "pending": "[dim]pending[/]",
    "only_in_a": "[dim]only in A[/]",
    "only_in_b": "[dim]only in B[/]",
}


def print_comparison(out: Console, comparison: Comparison, *, changed_only: bool = False) -> None:
    """Print ``comparison``: headline, warnings, the cell table (only changed cells with
    ``changed_only``) and the variant table. Piped, the tables get room for their columns
    (a pipe's 80 columns would wrap every interval)."""
    if not out.is_terminal:
        out.width = max(out.width, PIPED_WIDTH)
    out.print(
        f"[bold]A = {escape(_batch_name(comparison.a))}  →  B = "
        f"{escape(_batch_name(comparison.b))}[/]"
        + ("" if comparison.merged else "  (reruns not merged)")
    )
    out.print(f"[bold]{escape(comparison.headline)}[/]")
    for warning in comparison.warnings:
        out.print(f"[yellow]warning:[/] {escape(warning.message)}")
    cells = [
        c for c in comparison.cells if not changed_only or c.change in ("regression", "improvement")
    ]
    table = Table(title_justify="left", title="Cells (regressions first)")
    for name, justify in (
        ("case × variant", "left"),
        ("A", "right"),
        ("B", "right"),
        ("Δ [95% interval]", "right"),
        ("change", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]  # rich's literal type
    for cell in cells:
        change = _CHANGE[cell.change] + (" [bold]significant[/]" if cell.significant else "")
        table.add_row(
            escape(f"{cell.suite}/{cell.case} × {cell.variant}"),
            _side(cell.a),
            _side(cell.b),
            _delta(cell),
            change,
        )
    if cells:
        out.print(table)
    elif changed_only:
        out.print("No cell changed.")
    if comparison.variants:
        variants = Table(title_justify="left", title="Variants (cases both sides ran)")
        for name in (
            "variant",
            "cases passing A → B",
            "lost / gained",
            "McNemar p",
            "A",
            "B",
            "pass@k · pass^k A → B",
        ):
            variants.add_column(name, justify="left" if name == "variant" else "right")
        costed = any(v.cost_a.costed or v.cost_b.costed for v in comparison.variants)
        if costed:
            variants.add_column("cost per pass A → B", justify="right")
        for v in comparison.variants:
            row = [
                escape(v.variant),
                f"{v.passing_a} → {v.passing_b} of {v.shared_cases}",
                f"[red]-{len(v.only_a)}[/] / [green]+{len(v.only_b)}[/]",
                f"{v.p_value:.3g}" + (" [bold]*[/]" if v.significant else ""),
                _rate(v.rate_a, v.interval_a),
                _rate(v.rate_b, v.interval_b),
                f"{_pass_k(v.pass_k_a)} → {_pass_k(v.pass_k_b)}",
            ]
            if costed:
                row.append(
                    f"{format_usd(v.cost_a.per_passed_trial_usd)} → "
                    f"{format_usd(v.cost_b.per_passed_trial_usd)}"
                )
            variants.add_row(*row)
        out.print(variants)
    out.print(
        "[dim]Rates: passed/finished with Wilson 95% intervals; Δ: Newcombe 95% interval; "
        "p: exact McNemar on per-case majority outcomes (* below 0.05).[/]"
    )
    cost_a, cost_b = comparison.cost_a, comparison.cost_b
    if cost_a.costed or cost_b.costed:
        out.print(
            f"Cost: A {format_usd(cost_a.total_usd)} ({format_usd(cost_a.per_passed_trial_usd)}"
            f" per pass), B {format_usd(cost_b.total_usd)} "
            f"({format_usd(cost_b.per_passed_trial_usd)} per pass)"
        )
    out.print(f"Compare in the dashboard: {comparison_url(comparison)}", markup=False)


def _pass_k(curves: dict[str, dict[int, float]]) -> str:
    """pass@k and pass^k at the largest k every cell reaches: ``@3 0.92 ^3 0.41``."""
    at_k = curves.get("pass@k", {})
    if not at_k:
        return "—"
    k = max(at_k)
    return f"@{k} {at_k[k]:.2f} ^{k} {curves['pass^k'][k]:.2f}"
