"""proctor judges [--batch N] [--json]: each model judge (rubric x model) against people's trial
labels, with Cohen's kappa, the true positive and true negative rates and the confusion matrix;
``--json`` exports the labels too (those of batch N with ``--batch``)."""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandParser
from rich.markup import escape
from rich.table import Table

from evals_app.judge_agreement import KAPPA_FLOOR, LABELS_NEEDED, exported_labels, judge_agreements
from evals_app.models import Batch, Organization
from runner.batches.consoles import command_consoles
from runner.jobs.database import ensure_database


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = "Each judge against people's labels (kappa, TPR, TNR, confusion); --json with labels."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", type=int, metavar="N", help="export only batch N's labels")
        parser.add_argument("--json", action="store_true", help="print judges and labels as JSON")
        parser.add_argument(
            "--org", metavar="SLUG", help="organization (default: the embedded one)"
        )

    def handle(self, *args, **options) -> None:
        out, err = command_consoles()
        ensure_database()
        slug = options["org"] or Organization.EMBEDDED_SLUG
        organization = Organization.objects.filter(slug=slug).first()
        if organization is None:
            err.print(f"--org {slug}: no such organization", markup=False)
            sys.exit(2)
        batch_ids = None
        if options["batch"] is not None:
            if not Batch.objects.filter(pk=options["batch"], organization=organization).exists():
                err.print(
                    f"--batch: there is no batch {options['batch']} in organization {slug}",
                    markup=False,
                )
                sys.exit(2)
            batch_ids = [options["batch"]]
        judges = judge_agreements(organization)
        if options["json"]:
            payload = {
                "organization": organization.slug,
                "judges": [j.to_dict() for j in judges],
                "labels": exported_labels(organization, batch_ids=batch_ids),
            }
            sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
            return
        if not judges:
            out.print("No labelled trial has a judge's verdict yet.")
            return
        table = Table(title_justify="left", title="Judges against people's labels")
        for name in ("rubric", "model", "labels", "kappa", "TPR", "TNR", "judge +/- × people +/-"):
            table.add_column(name, justify="left" if name in ("rubric", "model") else "right")
        for judge in judges:
            a = judge.agreement
            kappa = "—" if a.kappa is None else f"{a.kappa:.2f}"
            table.add_row(
                escape(judge.rubric),
                escape(judge.model or "—"),
                str(a.n),
                f"[red]{kappa}[/]" if judge.flagged else kappa,
                _share(a.true_positive_rate),
                _share(a.true_negative_rate),
                f"{a.both_pass} {a.judge_only} / {a.person_only} {a.both_fail}",
            )
        out.print(table)
        out.print(
            f"[dim]Kappa in red: below {KAPPA_FLOOR} on {LABELS_NEEDED} labels or more. The "
            "matrix reads judge passed (people passed, failed) / judge failed (people passed, "
            "failed).[/]"
        )


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"
