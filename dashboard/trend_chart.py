"""The case page's trend: the case's pass rate per variant across the batches that ran it,
oldest to newest, with a dashed line where the case's version changed. A small SVG drawn on
the server (no chart library, no script), so it shows under the page's CSP and in any reader.

One query for the points, whatever the number of batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, Max, Q
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from evals_app.models import Case, Trial

# Colours of the series, in the order of the variants (wrapping after eight).
PALETTE = ("#3d5afe", "#15803d", "#c62828", "#b45309", "#6d28d9", "#0e7490", "#be185d", "#4b5363")

WIDTH, HEIGHT = 720, 220
LEFT, RIGHT, TOP, BOTTOM = 40, 16, 16, 34


@dataclass(frozen=True)
class TrendPoint:
    batch_id: int
    label: str
    version: int
    passed: int
    finished: int

    @property
    def rate(self) -> float:
        return self.passed / self.finished


@dataclass
class TrendSeries:
    variant: str
    colour: str
    points: list[TrendPoint] = field(default_factory=list)


@dataclass
class Trend:
    """The batches in time order (id, label, the case version each ran), and one series per
    variant."""

    batches: list[tuple[int, str, int]]
    series: list[TrendSeries]

    @property
    def boundaries(self) -> list[tuple[int, int]]:
        """(position, new version number) wherever the version differs from the batch before."""
        marks = []
        for i in range(1, len(self.batches)):
            if self.batches[i][2] != self.batches[i - 1][2]:
                marks.append((i, self.batches[i][2]))
        return marks


def case_trend(case: Case) -> Trend:
    """The trend of ``case`` over every batch that ran it to a graded result (one query)."""
    grouped = (
        Trial.objects.filter(run__case_version__case=case, status__in=Trial.FINAL_STATUSES)
        .order_by()
        .values("run__batch_id", "run__variant__name", "run__case_version__number")
        .annotate(
            created=Max("run__batch__created_at"),
            label=Max("run__batch__label"),
            passed=Count("id", filter=Q(status=Trial.Status.PASSED)),
            finished=Count("id"),
        )
    )
    rows = sorted(grouped, key=lambda r: (r["created"], r["run__batch_id"]))
    batches: dict[int, tuple[int, str, int]] = {}
    by_variant: dict[str, list[TrendPoint]] = {}
    for row in rows:
        batch_id, version = row["run__batch_id"], row["run__case_version__number"]
        batches.setdefault(batch_id, (batch_id, row["label"] or "", version))
        by_variant.setdefault(row["run__variant__name"], []).append(
            TrendPoint(batch_id, row["label"] or "", version, row["passed"], row["finished"])
        )
    series = [
        TrendSeries(name, PALETTE[i % len(PALETTE)], points)
        for i, (name, points) in enumerate(sorted(by_variant.items()))
    ]
    return Trend(batches=list(batches.values()), series=series)


def render_trend(trend: Trend) -> SafeString:
    """The trend as an ``<svg>``: x is the batch (in time order), y the pass rate 0-100%."""
    count = len(trend.batches)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    position = {batch_id: i for i, (batch_id, _, _) in enumerate(trend.batches)}

    def x(i: int) -> float:
        return LEFT + (plot_w / 2 if count == 1 else plot_w * i / (count - 1))

    def y(rate: float) -> float:
        return TOP + plot_h * (1 - rate)

    parts = [
        f'<svg class="trend-chart" id="trend-chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="Pass rate per variant across {count} batch{"es" if count != 1 else ""}">'
    ]
    for rate in (0.0, 0.5, 1.0):
        parts.append(
            f'<line class="grid-line" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(rate):.1f}" '
            f'y2="{y(rate):.1f}"/><text x="{LEFT - 6}" y="{y(rate) + 3:.1f}" '
            f'text-anchor="end">{rate * 100:.0f}%</text>'
        )
    for i, version in trend.boundaries:
        between = (x(i - 1) + x(i)) / 2
        parts.append(
            f'<g class="version-boundary" data-version="{version}"><line class="boundary" '
            f'x1="{between:.1f}" x2="{between:.1f}" y1="{TOP}" y2="{TOP + plot_h}"/>'
            f'<text x="{between + 3:.1f}" y="{TOP + 9}">v{version}</text>'
            f"<title>case version {version} from here on</title></g>"
        )
    for i, (batch_id, _, _) in enumerate(trend.batches):
        parts.append(
            f'<text x="{x(i):.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">#{batch_id}</text>'
        )
    for series in trend.series:
        name = escape(series.variant)
        coords = " ".join(f"{x(position[p.batch_id]):.1f},{y(p.rate):.1f}" for p in series.points)
        parts.append(
            f'<g class="trend-series" data-variant="{name}"><polyline class="series" '
            f'stroke="{series.colour}" points="{coords}"/>'
        )
        for p in series.points:
            label = f" ({p.label})" if p.label else ""
            parts.append(
                f'<circle class="point" r="4" fill="{series.colour}" '
                f'cx="{x(position[p.batch_id]):.1f}" cy="{y(p.rate):.1f}"><title>{name}: '
                f"{p.passed}/{p.finished} passed in batch #{p.batch_id}{escape(label)}, "
                f"v{p.version}</title></circle>"
            )
        parts.append("</g>")
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - numbers, and names escaped above
