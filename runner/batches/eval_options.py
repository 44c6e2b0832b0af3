"""The options of `proctor eval`, apart from what the command does with them.

`proctor eval --help` prints these without setting Django up (``proctor/site/cli.py``): this module
imports Django's command base and nothing that needs the app registry (no model, no URLconf),
so the help costs a fraction of a run's start-up. The command itself
(``runner/management/commands/eval.py``) is this class plus ``handle``.
"""

from __future__ import annotations

import os

from django.core.management.base import BaseCommand, CommandParser

from proctor.definitions import AdaptiveTrials, adaptive
from runner.jobs.pool_size import default_concurrency


def difference_points(value: str) -> float:
    """A difference of pass rates: 0.1, or 10 for 10 percentage points."""
    difference = float(value)
    if difference >= 1:
        difference /= 100
    if not 0 < difference < 1:
        raise ValueError(value)
    return difference


def trials_count(value: str) -> int | AdaptiveTrials:
    """``--trials``: a count (3), or adaptive trials from MIN to MAX (``adaptive:2:10``)."""
    if value.startswith("adaptive:"):
        bounds = value.removeprefix("adaptive:").split(":")
        if len(bounds) != 2:
            raise ValueError(value)
        return adaptive(min=int(bounds[0]), max=int(bounds[1]))
    return int(value)


def pass_rate(value: str) -> float:
    rate = float(value)
    if rate > 1:  # "80" means 80 %
        rate /= 100
    if not 0 <= rate <= 1:
        raise ValueError(value)
    return rate


def dollars(value: str) -> float:
    """A positive amount of US dollars: 0.50, or $0.50."""
    amount = float(value.strip().removeprefix("$"))
    if not amount > 0 or amount == float("inf"):
        raise ValueError(value)
    return amount


class EvalOptions(BaseCommand):
    # Django's system checks import the URLconf (DRF, the dashboard, the admin): a batch needs
    # none of them, and `proctor check` and every web process still run them.
    requires_system_checks: list[str] = []
    help = (
        "Run *.eval.py and *.eval.json files (default: every one below the current folder) "
        "as one batch."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "paths", nargs="*", help="eval files (*.eval.py, *.eval.json) or folders to search"
        )
        parser.add_argument(
            "--case",
            action="append",
            default=[],
            metavar="ID",
            help="run only this case (repeatable)",
        )
        parser.add_argument(
            "--variant",
            action="append",
            default=[],
            metavar="NAME",
            help="run only this variant (repeatable)",
        )
        parser.add_argument(
            "--trials",
            type=trials_count,
            metavar="N",
            help="trials per case and variant (overrides the suite), or adaptive:MIN:MAX for "
            "MIN trials and more, up to MAX, only where the outcome is undecided",
        )
        parser.add_argument(
            "--plan-trials",
            type=difference_points,
            metavar="DIFF",
            help="print, for each pair of variants, whether the cases and trials can find a "
            "difference of DIFF (0.1 or 10 for 10 points) and how many trials it needs, from "
            "the history of these suites, then exit without running",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="load and validate the eval files, list the suites, cases, variants and "
            "trials the batch would run, and exit without running or recording anything",
        )
        parser.add_argument(
            "-j",
            "--jobs",
            type=int,
            default=default_concurrency(),
            metavar="N",
            help="trials run at once (default: the CPU count)",
        )
        parser.add_argument(
            "--fail-under",
            type=pass_rate,
            metavar="RATE",
            help="exit 1 when the overall pass rate is below RATE (0-1, or a percentage)",
        )
        parser.add_argument(
            "--max-cost",
            type=dollars,
            metavar="USD",
            help="stop the batch once its trials' cost reaches USD: no trial starts after, the "
            "running ones are stopped, and they end as budget_exhausted (a suite's budget= "
            "caps it too; the smaller cap wins)",
        )
        parser.add_argument(
            "--json", action="store_true", help="print only the results as JSON on stdout"
        )
        parser.add_argument(
            "--label", default="", metavar="TEXT", help="a label for the batch (shown in lists)"
        )
        parser.add_argument(
            "--junit", metavar="PATH", help="also write the results as a JUnit XML report"
        )
        parser.add_argument(
            "--baseline",
            metavar="BATCH",
            help="compare the batch with batch BATCH, or with each suite's baseline "
            "(suite-baseline), and print the comparison",
        )
        parser.add_argument(
            "--fail-on-regression",
            action="store_true",
            help="exit 1 when the comparison with --baseline shows a significant regression",
        )
        parser.add_argument(
            "--org",
            metavar="SLUG",
            help="organization to record under (default: the embedded default; with --server, "
            "your only organization there)",
        )
        parser.add_argument(
            "--responder-model",
            metavar="MODEL",
            help="model the responder consults (overrides the eval)",
        )
        parser.add_argument(
            "--judge-model",
            metavar="MODEL",
            help="model that grades judge checks (overrides the eval)",
        )
        parser.add_argument(
            "--no-wait", action="store_true", help="queue the batch and exit (scaled mode)"
        )
        parser.add_argument(
            "--server",
            default=os.environ.get("PROCTOR_SERVER", "").strip() or None,
            metavar="URL",
            help="record and run the batch on this Proctor server (default: PROCTOR_SERVER)",
        )
        parser.add_argument(
            "--token",
            default=os.environ.get("PROCTOR_TOKEN", "").strip() or None,
            metavar="KEY",
            help="API token for --server, from `proctor createtoken` (default: PROCTOR_TOKEN)",
        )
