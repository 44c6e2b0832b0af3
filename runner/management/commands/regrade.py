"""proctor regrade BATCH [PATH...]: the checks of the current eval file run on the batch's
stored workspaces and transcripts, with no agent run, as a new batch linked to it; prints what
changed (passed -> failed and back). See runner.batches.regrade."""

from __future__ import annotations

import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from evals_app.models import Batch, Organization, Trial
from runner.batches.consoles import command_consoles
from runner.batches.planning import InvalidInput
from runner.batches.regrade import regrade_batch, regraded_trials
from runner.batches.submission import SubmissionError
from runner.jobs import dispatch
from runner.jobs.database import ensure_database
from runner.jobs.execution import abandon_unfinished

POLL_S = 0.2


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = "Run the current checks on a batch's stored workspaces, with no agent run."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batch", metavar="BATCH", help="the batch id to re-grade")
        parser.add_argument(
            "paths",
            nargs="*",
            metavar="PATH",
            help="the eval files whose checks to run (default: where the batch's eval was)",
        )
        parser.add_argument(
            "--org", metavar="SLUG", help="organization (default: the embedded one)"
        )
        parser.add_argument("-j", "--jobs", type=int, default=2, help="trials at once (default 2)")

    def handle(self, *args, **options) -> None:
        out, err = command_consoles()
        raw = str(options["batch"])
        if not raw.isdigit():
            self._invalid(err, [f"BATCH: {raw!r} is not a batch id (a number)"])
        ensure_database()
        dispatch.require_broker()
        slug = options["org"] or Organization.EMBEDDED_SLUG
        batch = Batch.objects.filter(pk=int(raw), organization__slug=slug).first()
        if batch is None:
            self._invalid(err, [f"BATCH: there is no batch {raw} in organization {slug}"])
        assert batch is not None  # _invalid exits
        try:
            regrade, trial_ids, skipped = regrade_batch(batch, options["paths"] or None)
        except (InvalidInput, SubmissionError) as exc:
            self._invalid(err, exc.problems)
        for line in skipped:
            err.print(f"warning: {line}", markup=False)
        err.print(
            f"Batch {regrade.pk}: {regrade.label} ({len(trial_ids)} trials, no agent run)",
            markup=False,
        )
        if settings.EMBEDDED:
            dispatch.configure_local_workers(max(1, min(options["jobs"], len(trial_ids))))
        try:
            futures = dispatch.enqueue(trial_ids)
            self._wait(regrade, futures)
        finally:
            dispatch.release_local_workers()
        for row in regraded_trials(regrade):
            change = f"{row.before} → {row.after}" if row.changed else f"{row.after} (unchanged)"
            line = f"{row.case} × {row.variant} trial #{row.index + 1}: {change}"
            if row.error:
                line += f" — {row.error}"
            out.print(line, markup=False)
        rows = regraded_trials(regrade)
        changed = sum(r.changed for r in rows)
        out.print(
            f"{changed} of {len(rows)} trials changed; compare: proctor compare {batch.pk} "
            f"{regrade.pk}",
            markup=False,
        )

    def _wait(self, regrade: Batch, futures) -> None:
        trials = Trial.objects.filter(run__batch=regrade)
        while trials.filter(status__in=Trial.UNFINISHED_STATUSES).exists():
            if futures is not None and all(f.done() for f in futures):
                failures = [f"{type(e).__name__}: {e}" for f in futures if (e := f.exception())]
                abandon_unfinished(
                    regrade, "; ".join(failures) or "the local worker returned without running it"
                )
                break
            time.sleep(POLL_S)
        for _ in range(50):  # the last trial's thread closes the batch just after it
            if Batch.objects.filter(pk=regrade.pk, status=Batch.Status.FINISHED).exists():
                break
            time.sleep(0.05)

    def _invalid(self, err, problems) -> None:
        for problem in problems:
            err.print(problem, markup=False)
        sys.exit(2)
