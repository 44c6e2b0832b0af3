"""proctor export BATCH --format atif [--out DIR]: every trial of a batch as an ATIF
``trajectory.json`` (``DIR/trial-<id>/trajectory.json``), with ``DIR/index.json`` naming each
trial's case, variant and status, so other tools can read Proctor's runs.

proctor export BATCH --otlp: the batch's finished trials and the batch itself sent as
OpenTelemetry traces to ``OTEL_EXPORTER_OTLP_ENDPOINT`` (runner.jobs.trace_export), as they
would have been sent while it ran."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from evals_app.atif_trajectory import trial_trajectory
from evals_app.models import Batch, Organization, Trial
from runner.batches.consoles import command_consoles
from runner.jobs import otlp_pipeline, trace_export
from runner.jobs.database import ensure_database

FORMATS = ("atif",)


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = "Write every trial of a batch as an ATIF trajectory.json."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batch", metavar="BATCH", help="the batch id")
        parser.add_argument(
            "--format", default="atif", help=f"the format ({', '.join(FORMATS)}; default: atif)"
        )
        parser.add_argument(
            "--otlp",
            action="store_true",
            help="send the batch as OpenTelemetry traces to OTEL_EXPORTER_OTLP_ENDPOINT instead",
        )
        parser.add_argument(
            "--out",
            metavar="DIR",
            help="the folder to write (default: ./proctor-export-BATCH)",
        )
        parser.add_argument(
            "--org", metavar="SLUG", help="organization (default: the embedded one)"
        )

    def handle(self, *args, **options) -> None:
        _out, err = command_consoles()
        if options["format"] not in FORMATS:
            self._invalid(
                err, f"--format {options['format']}: known formats are {', '.join(FORMATS)}"
            )
        raw = str(options["batch"])
        if not raw.isdigit():
            self._invalid(err, f"BATCH: {raw!r} is not a batch id (a number)")
        ensure_database()
        slug = options["org"]
        if not slug or slug == Organization.EMBEDDED_SLUG:
            organization = Organization.embedded_default()
        else:
            found = Organization.objects.filter(slug=slug).first()
            if found is None:
                self._invalid(err, f"--org {slug}: no such organization")
            assert found is not None
            organization = found
        batch = Batch.objects.filter(pk=int(raw), organization=organization).first()
        if batch is None:
            self._invalid(
                err, f"BATCH: there is no batch {raw} in organization {organization.slug}"
            )
        assert batch is not None  # _invalid exits
        if options["otlp"]:
            self._send(err, batch)
            return
        folder = Path(options["out"] or f"proctor-export-{raw}")
        trials = (
            Trial.objects.filter(run__batch=batch)
            .select_related("run__variant", "run__case_version__case")
            .order_by("id")
        )
        index = []
        for trial in trials:
            target = folder / f"trial-{trial.pk}" / "trajectory.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(
                json.dumps(trial_trajectory(trial), indent=2, ensure_ascii=False) + "\n",
                encoding="utf-8",
            )
            index.append(
                {
                    "trial": trial.pk,
                    "case": trial.run.case_version.case.slug,
                    "variant": trial.run.variant.name,
                    "status": trial.status,
                    "trajectory": target.relative_to(folder).as_posix(),
                }
            )
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "index.json").write_text(
            json.dumps({"batch": batch.pk, "format": "atif", "trials": index}, indent=2) + "\n",
            encoding="utf-8",
        )
        err.print(f"Wrote {len(index)} trajectories of batch {batch.pk} to {folder}", markup=False)

    def _send(self, err, batch: Batch) -> None:
        if not otlp_pipeline.enabled():
            self._invalid(
                err,
                "--otlp: set OTEL_EXPORTER_OTLP_ENDPOINT to the receiver's OTLP/HTTP address "
                "(such as http://127.0.0.1:6006 for Phoenix)",
            )
        trials = (
            Trial.objects.filter(run__batch=batch, status__in=Trial.FINAL_STATUSES)
            .select_related(*trace_export.TRIAL_RELATED)
            .order_by("id")
        )
        sent = 0
        for trial in trials.iterator(chunk_size=500):
            trace_export.export_trial(trial)
            sent += 1
        trace_export.export_batch(batch)
        lost = otlp_pipeline.flush()
        endpoint = otlp_pipeline.endpoint()
        if lost:
            err.print(
                f"Batch {batch.pk}: {lost} spans of {sent} trials could not be sent to {endpoint}",
                markup=False,
            )
            sys.exit(1)
        err.print(f"Sent {sent} trials of batch {batch.pk} as traces to {endpoint}", markup=False)

    def _invalid(self, err, problem: str) -> None:
        err.print(problem, markup=False)
        sys.exit(2)
