"""proctor compare A B [--json]: is batch B better than batch A, where did it regress, and can
the difference be trusted. A is a batch id or ``suite-baseline`` (the baseline of each suite
B ran); ``--mark-baseline N`` makes batch N the baseline of its suites. ``proctor compare BATCH
--variants X Y`` compares variants within one batch instead (evals_app.variant_comparison)."""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandParser
from rich.console import Console

from evals_app.comparison import Comparison, baseline_comparisons, compare_batches
from evals_app.models import Batch, Organization
from evals_app.variant_comparison import DEFAULT_DIFFERENCE, UnknownVariant, compare_variants
from runner.batches.comparison_output import (
    comparison_url,
    print_comparison,
    print_variant_comparison,
    variant_comparison_url,
)
from runner.batches.consoles import command_consoles
from runner.batches.eval_options import difference_points
from runner.jobs.database import ensure_database

SUITE_BASELINE = "suite-baseline"


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = "Compare batch B with batch A (or with the suites' baselines): regressions first."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "a", nargs="?", metavar="A", help=f"the reference: a batch id or {SUITE_BASELINE}"
        )
        parser.add_argument("b", nargs="?", metavar="B", help="the batch to judge: a batch id")
        parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
        parser.add_argument(
            "--all-trials",
            action="store_true",
            help="read each batch with all the trials of its reruns (default: the latest per cell)",
        )
        parser.add_argument(
            "--no-merge", action="store_true", help="read each batch alone, without its reruns"
        )
        parser.add_argument(
            "--changed", action="store_true", help="show only the cells that changed"
        )
        parser.add_argument(
            "--fail-on-regression",
            action="store_true",
            help="exit 1 when B has a significant regression",
        )
        parser.add_argument(
            "--mark-baseline",
            type=int,
            metavar="BATCH",
            help="make BATCH the baseline of every suite it ran, and exit",
        )
        parser.add_argument(
            "--org", metavar="SLUG", help="organization (default: the embedded one)"
        )
        parser.add_argument(
            "--variants",
            nargs="*",
            metavar="NAME",
            help="compare variants within batch A instead (give none for all of them): each "
            "one's interval, each pair's paired difference, McNemar test and power",
        )
        parser.add_argument(
            "--difference",
            type=difference_points,
            default=DEFAULT_DIFFERENCE,
            metavar="D",
            help="with --variants: the difference the power line plans for (0.1 or 10 for 10 "
            "points; default 10)",
        )

    def handle(self, *args, **options) -> None:
        out, err = command_consoles()
        ensure_database()
        organization = self._organization(err, options["org"])
        if options["mark_baseline"] is not None:
            batch = self._batch(err, organization, str(options["mark_baseline"]), "--mark-baseline")
            batch.mark_baseline()
            suites = ", ".join(batch.suite_slugs()) or "no suite"
            err.print(f"Batch {batch.pk} is now the baseline of {suites}.", markup=False)
            return
        if options["variants"] is not None:
            self._variants(out, err, organization, options)
            return
        if not options["a"] or not options["b"]:
            self._invalid(err, f"give two batches: proctor compare A B (A may be {SUITE_BASELINE})")
        # Both batches are looked up before either is refused: each missing one is its own line.
        named = {"A": options["a"], "B": options["b"]}
        if options["a"] == SUITE_BASELINE:
            del named["A"]
        found = {which: self._lookup(organization, raw, which) for which, raw in named.items()}
        problems = [problem for _, problem in found.values() if problem]
        if problems:
            self._invalid(err, "\n".join(problems))
        b = found["B"][0]
        assert b is not None
        merged = not options["no_merge"]
        mode = "all" if options["all_trials"] else "latest"
        if options["a"] == SUITE_BASELINE:
            comparisons, missing = baseline_comparisons(b, merged=merged, mode=mode)
            if missing:
                self._invalid(
                    err,
                    f"suite {', '.join(missing)} of batch {b.pk} has no baseline: mark one with "
                    f"`proctor compare --mark-baseline BATCH`",
                )
            if not comparisons:
                self._invalid(err, f"batch {b.pk} is itself the baseline of its suites")
        else:
            a = found["A"][0]
            assert a is not None
            comparisons = [compare_batches(a, b, merged=merged, mode=mode)]
        if options["json"]:
            data = [self._json(c) for c in comparisons]
            payload = data[0] if options["a"] != SUITE_BASELINE else {"comparisons": data}
            sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
        else:
            for i, comparison in enumerate(comparisons):
                if i:
                    out.print()
                print_comparison(out, comparison, changed_only=options["changed"])
        if options["fail_on_regression"] and any(c.has_significant_regression for c in comparisons):
            if not options["json"]:
                err.print("[red]B has a significant regression (--fail-on-regression).[/red]")
            sys.exit(1)

    def _variants(
        self, out: Console, err: Console, organization: Organization, options: dict
    ) -> None:
        """proctor compare BATCH --variants [A B ...]: variant against variant in one batch."""
        if not options["a"] or options["b"]:
            self._invalid(
                err, "give one batch with --variants: proctor compare BATCH --variants A B"
            )
        for option in ("changed", "fail_on_regression"):
            if options[option]:
                name = "--" + option.replace("_", "-")
                self._invalid(err, f"{name} compares two batches; it does not go with --variants")
        if options["variants"] and len(options["variants"]) < 2:
            self._invalid(err, "--variants needs two variants or more (or none for all of them)")
        batch = self._batch(err, organization, options["a"], "BATCH")
        mode = "all" if options["all_trials"] else "latest"
        try:
            comparison = compare_variants(
                batch,
                options["variants"] or None,
                merged=not options["no_merge"],
                mode=mode,
                difference=options["difference"],
            )
        except UnknownVariant as exc:
            self._invalid(err, f"--variants: {exc}")
        if options["json"]:
            payload = {**comparison.to_dict(), "url": variant_comparison_url(comparison)}
            sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
        else:
            print_variant_comparison(out, comparison)

    def _json(self, comparison: Comparison) -> dict:
        return {**comparison.to_dict(), "url": comparison_url(comparison)}

    def _invalid(self, err: Console, problem: str) -> None:
        err.print(problem, markup=False)
        sys.exit(2)

    def _organization(self, err: Console, slug: str | None) -> Organization:
        if not slug or slug == Organization.EMBEDDED_SLUG:
            return Organization.embedded_default()
        organization = Organization.objects.filter(slug=slug).first()
        if organization is None:
            self._invalid(err, f"--org {slug}: no such organization")
        assert organization is not None  # _invalid exits
        return organization

    def _batch(self, err: Console, organization: Organization, raw: str, which: str) -> Batch:
        batch, problem = self._lookup(organization, raw, which)
        if batch is None:
            self._invalid(err, problem)
        assert batch is not None  # _invalid exits
        return batch

    def _lookup(self, organization: Organization, raw: str, which: str) -> tuple[Batch | None, str]:
        """The batch ``raw`` names, or None and the one line that says why not."""
        if not raw.isdigit():
            return None, f"{which}: {raw!r} is not a batch id (a number)"
        batch = Batch.objects.filter(pk=int(raw), organization=organization).first()
        if batch is None:
            return None, f"{which}: there is no batch {raw} in organization {organization.slug}"
        return batch, ""
