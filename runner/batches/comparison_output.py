"""A comparison (evals_app.comparison) printed in the terminal with rich: the headline, the
comparability warnings, the cells (regressions first) and the per-variant paired test. Shared
by ``proctor compare`` and ``proctor eval --baseline``. Also the variants of one batch against
each other (evals_app.variant_comparison), for ``proctor compare BATCH --variants``."""

from __future__ import annotations

from django.conf import settings
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from evals_app.comparison import CellComparison, CellSide, Comparison
from evals_app.cost import format_usd
from evals_app.variant_comparison import VariantComparison, VariantPair, VariantSummary


def comparison_url(comparison: Comparison) -> str:
    """The dashboard's compare page for the two batches."""
    return f"{settings.PROCTOR_DASHBOARD_URL}/compare/?a={comparison.a.pk}&b={comparison.b.pk}"


def variant_comparison_url(comparison: VariantComparison) -> str:
    """The dashboard's variant compare page of the batch."""
    return f"{settings.PROCTOR_DASHBOARD_URL}/batches/{comparison.batch.pk}/variants/"


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


def _estimate(summary: VariantSummary) -> str:
    estimate = summary.estimate
    if estimate is None:
        return "—"
    if estimate.interval is None:
        return f"{estimate.mean:.1%} [dim](one case: no interval)[/]"
    low, high = estimate.interval
    return f"{estimate.mean:.1%} [dim][{low:.1%}–{high:.1%}][/]"


def _pair_difference(pair: VariantPair) -> str:
    estimate = pair.estimate
    if estimate is None:
        return "—"
    if estimate.interval is None:
        return f"{estimate.mean * 100:+.1f} pts"
    low, high = estimate.interval
    style = "bold" if pair.holds else "dim"
    return (
        f"[{style}]{estimate.mean * 100:+.1f} pts[/] [dim][{low * 100:+.1f}, {high * 100:+.1f}][/]"
    )


def print_variant_comparison(out: Console, comparison: VariantComparison) -> None:
    """Print the variants of one batch against each other: the headline, each variant's mean
    with its clustered interval and pass@k / pass^k, each pair's paired difference, McNemar
    test and power, and each pair's cases by difference."""
    if not out.is_terminal:
        out.width = max(out.width, PIPED_WIDTH)
    out.print(
        f"[bold]Variants of {escape(_batch_name(comparison.batch))}[/]"
        + ("" if comparison.merged else "  (reruns not merged)")
    )
    out.print(f"[bold]{escape(comparison.headline)}[/]")
    if comparison.variants:
        table = Table(title_justify="left", title="Variants (each case counts once)")
        for name in ("variant", "cases", "trials", "mean [95% interval]", "pass@k · pass^k"):
            table.add_column(name, justify="left" if name == "variant" else "right")
        for v in comparison.variants:
            measure = "" if not v.scored else " [dim](score)[/]"
            pass_k = "—"
            if v.top_k:
                pass_k = (
                    f"pass@{v.top_k} {v.pass_at_top_k:.2f} · pass^{v.top_k} {v.pass_hat_top_k:.2f}"
                )
            table.add_row(
                escape(v.variant) + measure, str(v.cases), str(v.trials), _estimate(v), pass_k
            )
        out.print(table)
    if comparison.pairs:
        pairs = Table(title_justify="left", title="Pairs (B − A over the cases both ran)")
        for name in (
            "A → B",
            "shared cases",
            "B − A [95% interval]",
            "holds",
            "lost / gained",
            "McNemar p",
            "detectable at 80% power",
        ):
            pairs.add_column(name, justify="left" if name == "A → B" else "right")
        for pair in comparison.pairs:
            power = pair.power
            pairs.add_row(
                escape(f"{pair.a} → {pair.b}"),
                str(len(pair.cases)),
                _pair_difference(pair),
                "[green]yes[/]" if pair.holds else "no",
                f"[red]-{len(pair.only_a)}[/] / [green]+{len(pair.only_b)}[/]",
                f"{pair.p_value:.3g}" + (" [bold]*[/]" if pair.significant else ""),
                f"{power.minimum_detectable * 100:.1f} pts" if power else "—",
            )
        out.print(pairs)
        for pair in comparison.pairs:
            if pair.power:
                out.print(
                    f"Enough trials? {escape(pair.a)} → {escape(pair.b)}: "
                    f"{escape(pair.power.sentence)}."
                )
        for pair in comparison.pairs:
            cases = Table(
                title_justify="left",
                title=f"Cases by difference, {escape(pair.a)} → {escape(pair.b)}",
            )
            for name in ("case", "A", "B", "B − A"):
                cases.add_column(name, justify="left" if name == "case" else "right")
            for case in pair.cases:
                cases.add_row(
                    escape(f"{case.suite}/{case.case}"),
                    f"{case.a.passed}/{case.a.finished} {case.a.mean:.0%}",
                    f"{case.b.passed}/{case.b.finished} {case.b.mean:.0%}",
                    f"{case.difference * 100:+.0f} pts",
                )
            out.print(cases)
    out.print(
        "[dim]Means: each case's mean trial score, averaged over cases, ± 1.96 case-clustered "
        "standard errors; B − A: the mean paired per-case difference; holds: its interval "
        "excludes 0; p: exact McNemar on per-case majority outcomes (* below 0.05).[/]"
    )
    out.print(f"Compare in the dashboard: {variant_comparison_url(comparison)}", markup=False)
