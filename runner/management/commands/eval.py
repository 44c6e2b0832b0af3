"""proctor eval [PATH...]: run eval files as a batch and print a case x variant table."""

from __future__ import annotations

import gc
import importlib.metadata
import json
import sys
import time
from concurrent.futures import BrokenExecutor
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import Count
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from evals_app.cost import format_usd
from evals_app.cost_forecast import forecast
from evals_app.models import Batch, Organization, Trial
from proctor.definitions import AdaptiveTrials
from proctor.rules import trials_problem
from runner.batches.consoles import command_consoles
from runner.batches.dry_run import dry_run_listing, print_dry_run
from runner.batches.eval_options import EvalOptions
from runner.batches.planning import (
    InvalidInput,
    Selection,
    endpoint_problems,
    load_suites,
    plan_batch,
    record_locally,
)
from runner.batches.report import batch_report, report_pass_rate
from runner.batches.stop_signals import StopSignal, exit_status, stop_signals_interrupt
from runner.batches.submission import SubmissionError, build_submission
from runner.batches.terminal_grid import grid
from runner.jobs import artifact_paths, dispatch, leases, reaper
from runner.jobs.adaptive import adaptive_sentence
from runner.jobs.database import ensure_database
from runner.jobs.execution import abandon_unfinished, finish_batch_if_done

# --server's client (httpx), --junit's writer and --baseline's comparison are imported where
# their option asks for them: a run without them starts that much sooner.
if TYPE_CHECKING:
    from evals_app.comparison import Comparison

POLL_S = 0.2
# How often the local wait redraws the progress bar from the database.
PROGRESS_READ_S = 0.5
# How long the wait gives a batch whose trials all ended to close (or to queue more trials).
CLOSING_WAIT_S = 2.5
SUITE_BASELINE = "suite-baseline"
# The end summary lists this many causes of failure; the batch page and --json list them all.
FAILURE_GROUPS_SHOWN = 10


def batch_cap(max_cost: float | None, planned: list) -> float | None:
    """The batch's budget: the smallest of --max-cost and the budgets of the suites it runs
    (None: no cap)."""
    caps = [max_cost, *(p.resolved.suite.budget for p in planned)]
    known = [cap for cap in caps if cap is not None]
    return min(known) if known else None


def proctor_version() -> str:
    """The installed Proctor's version: the harness code a batch ran with."""
    try:
        return importlib.metadata.version("proctor")
    except importlib.metadata.PackageNotFoundError:
        return ""


class Command(EvalOptions):
    """The options are EvalOptions' (`proctor eval --help` reads them without the apps)."""

    def handle(self, *args, **options) -> None:
        # SIGTERM and SIGHUP (a CI job cancelled, `timeout`, a closed terminal) close the batch
        # as a Ctrl-C does, rather than leaving it running with nobody to run it.
        with stop_signals_interrupt():
            self._run(options)

    def _run(self, options) -> None:
        out, err = command_consoles()
        if isinstance(options["trials"], AdaptiveTrials):
            if problem := trials_problem(options["trials"]):
                self._invalid(err, [f"--trials: {problem}"])
        elif options["trials"] is not None and options["trials"] < 1:
            self._invalid(err, ["--trials must be 1 or more"])
        if options["jobs"] < 1:
            self._invalid(err, ["-j must be 1 or more"])
        if options["junit"]:
            # Loaded where its option asks for it (see the imports above).
            from runner.batches.junit import junit_path_problem

            if problem := junit_path_problem(options["junit"]):
                self._invalid(err, [problem])
        if options["fail_on_regression"] and not options["baseline"]:
            self._invalid(err, ["--fail-on-regression needs --baseline BATCH or suite-baseline"])
        if options["plan_trials"] is not None and options["server"]:
            self._invalid(
                err, ["--plan-trials reads this installation's history; it does not use --server"]
            )
        if options["dry_run"] and options["plan_trials"] is not None:
            self._invalid(err, ["--dry-run and --plan-trials each print without running; use one"])
        if options["baseline"] and options["server"]:
            self._invalid(
                err,
                [
                    "--baseline compares in this installation's database; with --server, "
                    "compare on the server's dashboard or its /api/analysis/compare/ endpoint"
                ],
            )
        try:
            loaded = load_suites(options["paths"])
            planned = plan_batch(
                loaded, Selection(options["case"], options["variant"], options["trials"])
            )
            if options["plan_trials"] is not None:
                self._plan_trials(out, err, planned, options)
                return
            submission = build_submission(
                planned,
                {
                    "paths": options["paths"],
                    "jobs": options["jobs"],
                    "responder_model": options["responder_model"],
                    "judge_model": options["judge_model"],
                    "label": options["label"],
                    "proctor_version": proctor_version(),
                    "max_cost_usd": batch_cap(options["max_cost"], planned),
                },
                max_bytes=settings.BUNDLE_MAX_BYTES,
                own_folders=(settings.PROCTOR_HOME, settings.CACHE_DIR, settings.ARTIFACTS_DIR),
            )
        except (InvalidInput, SubmissionError) as exc:
            self._invalid(err, exc.problems)
        for warning in submission.warnings:
            err.print(f"warning: {warning}", markup=False)
        if options["dry_run"]:
            self._dry_run(out, err, planned, submission, options)
            return
        # --- the seam: from here the batch is recorded and run here (or on a server) ---
        if options["server"]:
            self._run_on_server(out, err, submission, options)
            return
        ensure_database()
        dispatch.require_broker()
        organization = self._organization(err, options["org"] or Organization.EMBEDDED_SLUG)
        baseline = self._baseline(err, organization, options["baseline"])
        try:
            batch, trial_ids, new_versions = record_locally(organization, submission)
        except InvalidInput as exc:
            self._invalid(err, exc.problems)
        # From here the batch is recorded: a Ctrl-C at any point leaves it closed and readable.
        interrupted: KeyboardInterrupt | None = None
        try:
            # More than one trial at a time: in worker processes (runner.jobs.trial_processes),
            # started once the batch is valid and recorded, so a refusal leaves none behind, and
            # no more of them than there are trials. On a broker the `proctor worker` processes
            # run the trials: none is started here (idle, they held this command's output open
            # past a Ctrl-C, and a Ctrl-C during their fork was lost).
            if settings.EMBEDDED:
                workers = max(1, min(options["jobs"], len(trial_ids)))
                dispatch.configure_local_workers(workers, processes=workers > 1)
            if not options["json"]:
                self._print_batch_line(err, batch.pk, len(trial_ids), new_versions)
                self._print_forecast(err, organization, planned, batch.max_cost_usd)
            # What was loaded so far (Django, the eval files, the batch) lives as long as the
            # run: kept out of the collector's view while the trials run, a full collection no
            # longer walks all of it each time. Handed back after, so garbage among it is still
            # collected (tests and benchmarks run many evals in one process).
            gc.freeze()
            futures = dispatch.enqueue(trial_ids)
            if settings.EMBEDDED:
                # The pool's own reaper: a trial of this batch whose run was lost is run again.
                reaper.start(batch_id=batch.pk)
            if options["no_wait"]:
                if options["json"]:
                    out.print_json(json.dumps({"batch": batch.pk, "queued": len(trial_ids)}))
                return
            self._wait(batch, len(trial_ids), err, quiet=options["json"], futures=futures)
        except KeyboardInterrupt as stop:  # Ctrl-C, or a StopSignal
            interrupted = stop
        finally:
            dispatch.release_local_workers(interrupted=interrupted is not None)
            gc.unfreeze()
        if interrupted is not None:
            self._interrupted(err, batch, interrupted)
        batch.refresh_from_db()
        footer = f"Artifacts: {artifact_paths.batch_dir(batch.pk)}  ·  browse with `proctor serve`"
        comparisons = None
        if options["baseline"]:
            comparisons = self._compare(err, batch, baseline)
        self._finish(out, err, batch_report(batch), footer, options, comparisons=comparisons)

    def _interrupted(self, err: Console, batch: Batch, stop: KeyboardInterrupt) -> None:
        """Ctrl-C, SIGTERM or SIGHUP: the batch is closed with a readable record, its unfinished
        trials ended as errored (a trial still running in this process finds its lease gone and
        ends its agent), and the command exits in one line, 130 for Ctrl-C and 128 + the
        signal's number for the others. A batch queued on the broker is the workers' to run:
        only the waiting stops."""
        code = exit_status(stop)
        if isinstance(stop, StopSignal):
            how, headline = stop.signal_name, f"Stopped ({stop.signal_name})"
        else:
            how, headline = "Ctrl-C", "Interrupted"
        if not settings.EMBEDDED:
            err.print(
                f"Stopped waiting: batch {batch.pk} goes on on the workers "
                f"(browse it with `proctor serve`).",
                markup=False,
            )
            raise SystemExit(code)
        count = Trial.end_unfinished(
            Trial.objects.filter(run__batch=batch),
            reason="interrupted",
            error=f"proctor eval was interrupted ({how}) before this trial ended",
        )
        leases.renew_now()  # this process's own trials (a thread's) learn it now, not at a beat
        finish_batch_if_done(batch.pk)
        err.print(
            f"{headline}: batch {batch.pk} closed; {count} unfinished trial"
            f"{'s' if count != 1 else ''} recorded as errored (interrupted).",
            markup=False,
        )
        raise SystemExit(code)

    def _run_on_server(self, out: Console, err: Console, submission, options) -> None:
        """Upload the bundles the server lacks, record the batch there, follow its workers'
        progress and print its report like a local run's. Any refusal exits 2 in one line (or
        the server's problems, one per line) with no batch recorded."""
        # Loaded where its option asks for it (see the imports above).
        from runner.batches.remote import FINAL_STATUSES, ProctorServer, RemoteError, bundle_names

        if not options["token"]:
            self._invalid(
                err,
                [
                    "--server needs a token: pass --token or set PROCTOR_TOKEN "
                    "(make one with `proctor createtoken USERNAME` on the server)"
                ],
            )
        quiet = options["json"]
        try:
            with ProctorServer(
                options["server"], options["token"], organization=options["org"]
            ) as server:
                uploaded = server.upload_bundles(submission.bundles, bundle_names(submission.value))
                batch = server.submit(submission.value)
                if not quiet:
                    err.print(
                        f"Uploaded {uploaded.new} new bundle{'s' if uploaded.new != 1 else ''} "
                        f"({uploaded.bytes / 1024:.1f} KB) to {server.url}, "
                        f"{uploaded.present} already there",
                        markup=False,
                    )
                    self._print_batch_line(err, batch.id, batch.trials, batch.new_versions)
                    err.print(f"Dashboard: {batch.url}", markup=False)
                if options["no_wait"]:
                    if quiet:
                        out.print_json(json.dumps({"batch": batch.id, "queued": batch.trials}))
                    return
                if not quiet:
                    err.print("Queued on the server; waiting for its workers to run it.")
                with self._progress(err, quiet=quiet) as progress:
                    task = progress.add_task(
                        "trials", total=batch.trials, passed=0, failed=0, timed_out=0, errored=0
                    )

                    def show(counts: dict[str, int]) -> None:
                        final = {status: counts.get(status, 0) for status in FINAL_STATUSES}
                        # An adaptive batch's total grows as undecided cells get trials.
                        total = counts.get("total", batch.trials)
                        progress.update(task, total=total, completed=sum(final.values()), **final)  # type: ignore[arg-type]  # extra fields

                    try:
                        server.wait(batch.id, show)
                    except KeyboardInterrupt as stop:
                        # As with a broker: the batch is the server's workers' to run.
                        progress.stop()
                        err.print(
                            f"Stopped waiting: batch {batch.id} goes on on the server "
                            f"({batch.url}).",
                            markup=False,
                        )
                        raise SystemExit(exit_status(stop)) from None
                report = server.report(batch.id)
        except RemoteError as exc:
            self._invalid(err, exc.lines)
        self._finish(out, err, report, f"Dashboard: {batch.url}", options)

    def _print_forecast(
        self, err: Console, organization: Organization, planned: list, cap: float | None
    ) -> None:
        """What the batch will cost, per variant, from the history of its variants (before any
        trial starts), and the cap it runs under."""
        trials_by_variant: dict[str, int] = {}
        for p in planned:
            for variant in p.variants:
                trials_by_variant[variant.name] = trials_by_variant.get(variant.name, 0) + p.trials
        predicted = forecast(organization, trials_by_variant)
        headline = predicted.headline
        if cap is not None:
            headline += f"; budget {format_usd(cap)}"
            if (predicted.low_usd or 0.0) >= cap:
                headline += " (it will stop before the end)"
            elif (predicted.high_usd or 0.0) >= cap:
                headline += " (it may stop before the end)"
        err.print(headline, markup=False)
        if predicted.known:
            for variant in predicted.variants:
                err.print(f"  {variant.sentence}", markup=False)

    def _print_batch_line(self, err: Console, batch: int, trials: int, new_versions: int) -> None:
        versions = (
            f", {new_versions} new case version{'s' if new_versions != 1 else ''}"
            if new_versions
            else ""
        )
        err.print(f"Batch {batch}: {trials} trial{'s' if trials != 1 else ''}{versions}")

    def _finish(
        self,
        out: Console,
        err: Console,
        report: dict,
        footer: str,
        options,
        *,
        comparisons: list[Comparison] | None = None,
    ) -> None:
        """Print the results (a table, or --json), write --junit, and exit by --fail-under and
        --fail-on-regression: the same for a batch run here and one run by a server."""
        if options["junit"]:
            # Loaded where its option asks for it (see the imports above).
            from runner.batches.junit import write_junit

            try:
                written = write_junit(report, options["junit"])
            except OSError as exc:
                self._invalid(err, [f"--junit {options['junit']}: cannot write it ({exc})"])
            if not options["json"]:
                err.print(f"JUnit report: {written}", markup=False)
        if comparisons is not None:
            # Loaded where its option asks for it (see the imports above).
            from runner.batches.comparison_output import comparison_url, print_comparison
        if options["json"]:
            if comparisons is not None:
                report = {
                    **report,
                    "comparisons": [{**c.to_dict(), "url": comparison_url(c)} for c in comparisons],
                }
            sys.stdout.write(json.dumps(report, ensure_ascii=False) + "\n")
        else:
            self._print_table(out, report, footer)
            for comparison in comparisons or []:
                out.print()
                print_comparison(out, comparison, changed_only=True)
        failed = False
        rate = report_pass_rate(report)
        if options["fail_under"] is not None and rate < options["fail_under"]:
            if not options["json"]:
                err.print(
                    f"[red]Pass rate {rate:.0%} is under --fail-under {options['fail_under']:.0%}.[/red]"
                )
            failed = True
        if options["fail_on_regression"] and any(
            c.has_significant_regression for c in comparisons or []
        ):
            if not options["json"]:
                err.print(
                    "[red]A significant regression against the baseline "
                    "(--fail-on-regression).[/red]"
                )
            failed = True
        if failed:
            sys.exit(1)

    def _baseline(self, err: Console, organization: Organization, raw: str | None) -> Batch | None:
        """The batch --baseline names (None for none, or for suite-baseline: resolved per
        suite once the batch ran); a bad value exits 2 before anything runs."""
        if not raw or raw == SUITE_BASELINE:
            return None
        if not raw.isdigit():
            self._invalid(err, [f"--baseline {raw}: give a batch id or {SUITE_BASELINE}"])
        batch = Batch.objects.filter(pk=int(raw), organization=organization).first()
        if batch is None:
            self._invalid(
                err,
                [f"--baseline {raw}: there is no batch {raw} in organization {organization.slug}"],
            )
        return batch

    def _compare(self, err: Console, batch: Batch, baseline: Batch | None) -> list[Comparison]:
        """The comparisons --baseline asks for; a suite with no baseline is said, not failed
        (the first run of a pipeline has nothing to compare with)."""
        # Loaded where its option asks for it (see the imports above).
        from evals_app.comparison import baseline_comparisons, compare_batches

        if baseline is not None:
            # Only what this batch ran: a baseline of every suite is no regression of a subset.
            return [compare_batches(baseline, batch, suites=batch.suite_slugs())]
        comparisons, missing = baseline_comparisons(batch)
        for slug in missing:
            err.print(
                f"[yellow]suite {escape(slug)} has no baseline yet[/]: nothing to compare it "
                f"with (mark one: proctor compare --mark-baseline {batch.pk})"
            )
        return comparisons

    def _plan_trials(self, out: Console, err: Console, planned: list, options: dict) -> None:
        """--plan-trials DIFF: each pair's power for the planned cases and trials, from the
        history of these suites, printed instead of running the batch."""
        # Loaded where its option asks for it: a run never needs the planning of trials.
        from evals_app.trial_planning import plan_pairs

        ensure_database()
        organization = self._organization(err, options["org"] or Organization.EMBEDDED_SLUG)
        cases = [
            (p.resolved.suite.id, p.resolved.case.id, [v.name for v in p.variants], p.trials)
            for p in planned
        ]
        difference = options["plan_trials"]
        pairs = plan_pairs(organization, cases, difference)
        if options["json"]:
            out.print_json(
                json.dumps({"difference": difference, "pairs": [p.to_dict() for p in pairs]})
            )
            return
        wanted = f"{difference * 100:.0f} points"
        if not pairs:
            out.print(
                f"One variant runs: --plan-trials plans for a difference between two variants "
                f"({wanted}); there is no pair to plan for.",
                markup=False,
            )
            return
        out.print(f"[bold]Enough trials for {escape(wanted)}?[/] (80% power, two-sided 5% test)")
        for pair in pairs:
            plan = pair.plan
            out.print(
                f"{escape(pair.a)} → {escape(pair.b)}: {plan.cases} case"
                f"{'s' if plan.cases != 1 else ''} × {plan.trials} trial"
                f"{'s' if plan.trials != 1 else ''} find {plan.minimum_detectable * 100:.1f} "
                f"points; {escape(plan.sentence)}.\n  [dim]{escape(pair.source)}[/]"
            )
        out.print("Nothing ran: run again without --plan-trials (and with --trials N) to run.")

    def _dry_run(self, out: Console, err: Console, planned: list, submission, options) -> None:
        """--dry-run: the batch validated as far as it can be without a database (the model
        endpoint its responders, simulated users and judges need included), then listed;
        nothing is run, recorded or written."""
        if problems := endpoint_problems(submission.value["cases"]):
            self._invalid(err, problems)
        listing = dry_run_listing(planned)
        if options["json"]:
            sys.stdout.write(json.dumps(listing, ensure_ascii=False) + "\n")
        else:
            print_dry_run(out, listing)

    def _invalid(self, err: Console, problems) -> None:
        for problem in problems:
            err.print(problem, markup=False)
        sys.exit(2)

    def _organization(self, err: Console, slug: str) -> Organization:
        if slug == Organization.EMBEDDED_SLUG:
            return Organization.embedded_default()
        organization = Organization.objects.filter(slug=slug).first()
        if organization is None:
            self._invalid(
                err,
                [
                    f"--org {slug}: no such organization (create it with `proctor createuser --org {slug}`)"
                ],
            )
        assert organization is not None  # _invalid exits
        return organization

    def _wait(self, batch: Batch, total: int, err: Console, *, quiet: bool, futures) -> None:
        """Wait for the batch's trials, the bar drawn from the database. ``total`` grows in an
        adaptive batch as undecided cells get more trials, so it is counted again each time;
        the local work to wait for is the pool's, which holds the trials queued since too."""
        trials = Trial.objects.filter(run__batch=batch)
        if not settings.EMBEDDED and not quiet:
            err.print("Queued on the broker; waiting for `proctor worker` processes to run it.")
        with self._progress(err, quiet=quiet) as progress:
            task = progress.add_task(
                "trials", total=total, passed=0, failed=0, timed_out=0, errored=0
            )
            # When every trial was first seen ended with the batch still open (see below).
            all_ended_at: float | None = None
            while True:
                # Before counting: a trial ending after the count wakes the wait below at once.
                ended = dispatch.ended_count()
                local_left = futures is not None and dispatch.pending_count() > 0
                counts = dict.fromkeys(["passed", "failed", "timed_out", "errored"], 0)
                total = 0
                # Trials the batch's budget ended count as done, in no outcome of the bar.
                stopped = 0
                # Counted by the database: one row per status, whatever the batch's size.
                for status, count in (
                    trials.values_list("status").annotate(count=Count("id")).order_by()
                ):
                    total += count
                    if status == Trial.Status.BUDGET_EXHAUSTED:
                        stopped = count
                    elif status in counts:
                        counts[status] += count
                done = sum(counts.values()) + stopped
                progress.update(task, total=total, completed=done, **counts)  # type: ignore[arg-type]  # extra fields
                if (
                    done >= total
                    and Batch.objects.filter(pk=batch.pk, status=Batch.Status.FINISHED).exists()
                ):
                    break
                if futures is not None and not local_left and done < total:
                    if any(isinstance(f.exception(), BrokenExecutor) for f in futures if f.done()):
                        # A worker process died and took the pool with it: the trials that
                        # never started are queued again now, and those that were running
                        # once the reaper sees their lease lapse (PROCTOR_LEASE_S). From
                        # here the database alone says when the batch is done.
                        if not quiet:
                            err.print(
                                "[yellow]A trial worker process died[/]: its trials run again "
                                "once their lease lapses."
                            )
                        dispatch.enqueue(
                            trials.filter(status=Trial.Status.QUEUED).values_list("pk", flat=True)
                        )
                        futures = None
                        continue
                    # Every local task returned, yet a trial is not final: say so, don't hang.
                    failures = [
                        f"{type(e).__name__}: {e}"
                        for f in futures
                        if f.done() and (e := f.exception())
                    ]
                    if abandon_unfinished(
                        batch, "; ".join(failures) or "the local worker returned without running it"
                    ):
                        continue  # counted as errored on the next pass
                if done >= total:
                    # Every trial ended but the batch is not closed yet: its last trial's end
                    # is closing it, or queuing an undecided cell's next trial. Waited for a
                    # few seconds at most, as a batch that cannot close must not hang this.
                    now = time.monotonic()
                    all_ended_at = all_ended_at or now
                    if now - all_ended_at > CLOSING_WAIT_S:
                        break
                    time.sleep(0.05)
                    continue
                all_ended_at = None
                if settings.EMBEDDED:
                    # The bar is redrawn from the database every PROGRESS_READ_S, and at once
                    # when the pool's work ends; the timeout still notices trials that other
                    # processes end (a lease taken over, the reaper).
                    # Once every local task has ended only the timeout is left to wait for:
                    # a count already reached would return at once, and the loop would spin.
                    target = ended + dispatch.pending_count() if local_left else None
                    dispatch.wait_until_ended(target, PROGRESS_READ_S)
                else:
                    time.sleep(POLL_S)

    def _progress(self, err: Console, *, quiet: bool) -> Progress:
        """The trials bar, fed from the database here or from a server's API."""
        return Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "[green]{task.fields[passed]} passed[/] [red]{task.fields[failed]} failed[/] "
                "[yellow]{task.fields[timed_out]} timed out[/] [magenta]{task.fields[errored]} errored[/]"
            ),
            TimeElapsedColumn(),
            console=err,
            disable=quiet,
            transient=False,
        )

    def _print_table(self, out: Console, report: dict, footer: str) -> None:
        out.print(grid(report, out))
        if saving := report.get("adaptive"):
            out.print(adaptive_sentence(saving), markup=False)
        budget = report.get("budget") or {}
        if budget.get("reached_usd") is not None:
            ended = budget.get("budget_exhausted", 0)
            out.print(
                f"[yellow]Batch {report['batch']} stopped: budget reached at "
                f"{format_usd(budget['reached_usd'])}[/] (cap {format_usd(budget['max_cost_usd'])}"
                f"); {ended} trial{'s' if ended != 1 else ''} not run or stopped "
                f"(budget_exhausted)."
            )
        for variant, warnings in report["validity_warnings"].items():
            listed = ", ".join(f"{name} × {n}" for name, n in warnings.items())
            out.print(f"[yellow]warning[/] {escape(variant)}: {escape(listed)}")
        self._print_failure_groups(out, report.get("failure_groups") or [])
        for run in report["runs"]:
            for trial in run["trials"]:
                if trial["status"] == "errored":
                    where = escape(
                        f"{run['case']} × {run['variant']} #{trial['index']}: {trial['error']}"
                    )
                    out.print(f"[magenta]errored[/] {where}")
        out.print(footer, markup=False)

    def _print_failure_groups(self, out: Console, groups: list[dict]) -> None:
        """The failed and errored trials by cause, one line a cause, largest first: "30 failed:
        AssertionError: expected 200, got 500 in check health-route"."""
        if not groups:
            return
        out.print("[bold]Failures by cause[/]")
        for group in groups[:FAILURE_GROUPS_SHOWN]:
            colour = "red" if group["status"] == "failed" else "magenta"
            out.print(
                f"  [{colour}]{group['count']} {group['status']}[/]: {escape(group['cause'])}"
            )
        if len(groups) > FAILURE_GROUPS_SHOWN:
            rest = len(groups) - FAILURE_GROUPS_SHOWN
            out.print(f"  and {rest} more cause{'s' if rest != 1 else ''} (see the batch page)")
