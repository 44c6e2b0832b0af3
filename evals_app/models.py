"""Proctor's domain: what was defined (suites, cases, versions, variants) and what ran
(batches, runs, trials, turns, events, checks).

A CaseVersion is never edited: a changed definition makes a new one, and runs pin the version
they ran, so history survives every edit of an eval file.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, models, transaction
from django.utils import timezone

from evals_app import hot_sql
from evals_app.source_texts import SourceFile, SourceTextsField  # noqa: F401 (a model of the app)
from proctor.rules import HANDLE_MAX, NAME_MAX


class Organization(models.Model):
    """The tenant. Every suite, case and batch belongs to exactly one."""

    EMBEDDED_SLUG = "default"

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, related_name="organizations", blank=True
    )
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.name

    @classmethod
    def embedded_default(cls) -> Organization:
        """The organization an install with nothing configured records everything under."""
        org, _ = cls.objects.get_or_create(slug=cls.EMBEDDED_SLUG, defaults={"name": "Default"})
        return org


class Suite(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="suites")
    slug = models.CharField(max_length=HANDLE_MAX)
    name = models.CharField(max_length=NAME_MAX)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "slug"], name="suite_slug_unique_in_org"
            )
        ]
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name


class Case(models.Model):
    """A stable handle whose history (its versions and their runs) is kept under its id."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="cases")
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="cases")
    slug = models.CharField(max_length=HANDLE_MAX)
    name = models.CharField(max_length=NAME_MAX)
    tags = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "slug"], name="case_slug_unique_in_org")
        ]
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name

    def latest_version(self) -> CaseVersion | None:
        return self.versions.order_by("-number").first()


class CaseVersion(models.Model):
    """An immutable snapshot of a case's resolved definition, numbered 1, 2, 3 per case.

    ``definition`` is the canonical JSON that ``definition_hash`` hashes; ``sources`` holds the
    captured text of the eval module, its validators and its prepare (path -> text), empty
    when the suite turned capture off. ``module_path`` lets a worker import the eval file again
    to run the callables this version names.
    """

    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    definition = models.JSONField()
    definition_hash = models.CharField(max_length=64)
    # Stored as path -> digest of a SourceFile (evals_app.source_texts), read as path -> text.
    sources = SourceTextsField(default=dict, blank=True)
    module_path = models.CharField(max_length=1000)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["case", "number"], name="case_version_number_unique"),
            models.UniqueConstraint(
                fields=["case", "definition_hash"], name="case_version_hash_unique"
            ),
        ]
        ordering = ["case", "number"]

    def __str__(self) -> str:
        return f"{self.case.slug} v{self.number}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None and not kwargs.pop("_allow_update", False):
            raise ValueError(
                "A CaseVersion is immutable; a changed definition makes a new version."
            )
        super().save(*args, **kwargs)


class Bundle(models.Model):
    """The code a case version or a variant ran, content-addressed and stored once per
    organization: the eval module with its local imports and data files (``tree``), a profile
    folder (``tree``), or a local repository at the commit it resolved to (``git``).

    ``data`` is empty when the bundle lives in the folder store (``PROCTOR_BUNDLE_STORE``).
    """

    class Kind(models.TextChoices):
        TREE = "tree"
        GIT = "git"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="bundles")
    digest = models.CharField(max_length=64)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.TREE)
    size = models.PositiveBigIntegerField(default=0)
    data = models.BinaryField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "digest"], name="bundle_digest_unique_in_org"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} bundle {self.digest[:12]}"


class Variant(models.Model):
    """One condition: harness, model, profile and sandbox, as the spec that was run.

    Two variants with the same name but a different spec are different rows, so a result is
    always explained by the exact configuration that produced it.
    """

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="variants"
    )
    name = models.CharField(max_length=NAME_MAX)
    harness = models.CharField(max_length=50)
    model = models.CharField(max_length=NAME_MAX, blank=True, default="")
    sandbox = models.CharField(max_length=50, default="local")
    spec = models.JSONField()
    spec_hash = models.CharField(max_length=64)
    # sha256 of the profile folder the agent ran from: a changed byte is a new variant.
    profile_digest = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "spec_hash"], name="variant_spec_unique_in_org"
            )
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Batch(models.Model):
    """One execution of a set of suites: one Run per (case version x variant)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        FINISHED = "finished"

    LABEL_MAX = 200  # characters of --label

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="batches")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    # A rerun points at the batch it came from.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns"
    )
    label = models.CharField(max_length=LABEL_MAX, blank=True, default="")
    # The batch compare and `--baseline suite-baseline` measure others against; at most one
    # per organization and suite (see mark_baseline).
    is_baseline = models.BooleanField(default=False)
    options = models.JSONField(default=dict, blank=True)
    # The cap on what the batch may spend in US dollars (`--max-cost`, a suite's `budget=`):
    # once its trials' cost reaches it, no trial starts and the running ones are stopped, as
    # budget_exhausted. Null: no cap. ``budget_reached_usd`` is what had been spent when it
    # stopped (null while it has not).
    max_cost_usd = models.FloatField(null=True, blank=True)
    budget_reached_usd = models.FloatField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        verbose_name_plural = "batches"
        ordering = ["-created_at", "-id"]
        indexes = [
            # the grid's "latest batch of this organization"
            models.Index(fields=["organization", "-created_at"], name="batch_latest_in_org"),
        ]

    def __str__(self) -> str:
        return f"batch {self.pk}"

    def suite_slugs(self) -> list[str]:
        """The slugs of the suites this batch ran (one query)."""
        return sorted(
            set(
                Run.objects.filter(batch_id=self.pk).values_list(
                    "case_version__case__suite__slug", flat=True
                )
            )
        )

    def mark_baseline(self) -> None:
        """Make this batch the baseline of every suite it ran: any other batch of the
        organization that was the baseline of one of those suites stops being one."""
        with transaction.atomic():
            slugs = self.suite_slugs()
            Batch.objects.select_for_update().filter(
                organization_id=self.organization_id,
                is_baseline=True,
                runs__case_version__case__suite__slug__in=slugs,
            ).exclude(pk=self.pk).update(is_baseline=False)
            Batch.objects.filter(pk=self.pk).update(is_baseline=True)
        self.is_baseline = True

    def unmark_baseline(self) -> None:
        """Stop this batch being a baseline."""
        Batch.objects.filter(pk=self.pk).update(is_baseline=False)
        self.is_baseline = False

    def spent_usd(self) -> float:
        """What the batch's trials cost so far, from the counts its runs keep (one query)."""
        spent = Run.objects.filter(batch_id=self.pk).aggregate(spent=models.Sum("trials_cost_usd"))
        return float(spent["spent"] or 0.0)

    def stop_at_budget(self) -> list[tuple[int, int]]:
        """When the batch has a cap and its trials' cost reached it: record what was spent (once)
        and end every trial not yet final as budget_exhausted: the queued ones never start,
        the running ones find their lease gone and end their agents. Returns the (trial id,
        run id) of the trials it ended (none when under the cap)."""
        if self.max_cost_usd is None:
            return []
        spent = self.spent_usd()
        if spent < self.max_cost_usd:
            return []
        with transaction.atomic():
            batch = Batch.objects.select_for_update().get(pk=self.pk)
            if batch.budget_reached_usd is None:
                batch.budget_reached_usd = spent
                batch.save(update_fields=["budget_reached_usd"])
            # Under the batch's row lock: another trial ending now waits here, then finds none.
            unfinished = Trial.objects.filter(
                run__batch_id=self.pk, status__in=Trial.UNFINISHED_STATUSES
            )
            ended = list(unfinished.values_list("pk", "run_id"))
            Trial.objects.filter(
                pk__in=[trial_id for trial_id, _ in ended],
                status__in=Trial.UNFINISHED_STATUSES,
            ).update(
                status=Trial.Status.BUDGET_EXHAUSTED,
                finish_reason="budget",
                finished_at=timezone.now(),
                lease_owner="",
                lease_expires_at=None,
            )
        self.budget_reached_usd = batch.budget_reached_usd
        return ended

    def close_if_done(self) -> bool:
        """Mark the batch finished once none of its trials is left to run; True when this call
        closed it. Two trials ending together both ask; the row lock lets exactly one close it."""
        with transaction.atomic():
            batch = Batch.objects.select_for_update().get(pk=self.pk)
            closed = batch.close_locked()
        if closed:
            self.status, self.finished_at = batch.status, batch.finished_at
        return closed

    def close_locked(self) -> bool:
        """``close_if_done``'s work for a caller that holds this batch's row lock (in a
        transaction): an adaptive batch decides its next trials under the same lock."""
        if self.status == Batch.Status.FINISHED:
            return False
        if Trial.objects.filter(
            run__batch_id=self.pk, status__in=Trial.UNFINISHED_STATUSES
        ).exists():
            return False
        self.status = Batch.Status.FINISHED
        self.finished_at = timezone.now()
        self.save(update_fields=["status", "finished_at"])
        return True

    @property
    def is_adaptive(self) -> bool:
        """Whether some of its runs follow ``adaptive(...)`` (runner.jobs.adaptive)."""
        return bool((self.options or {}).get("adaptive"))


class Run(models.Model):
    """The trials of one case version under one variant, with the spec it ran with."""

    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="runs")
    case_version = models.ForeignKey(CaseVersion, on_delete=models.PROTECT, related_name="runs")
    variant = models.ForeignKey(Variant, on_delete=models.PROTECT, related_name="runs")
    spec = models.JSONField(default=dict)
    # The adaptive(...) rule its trials follow ({"min", "max", "threshold", "confidence"}):
    # min trials first, one more at a time while undecided (runner.jobs.adaptive). Null: the
    # trials it was made with, no more.
    adaptive = models.JSONField(null=True, blank=True, default=None)
    # What the run's trials add up to, kept by database triggers on every write of a trial
    # (migration 0009), so a page counts a batch's runs rather than its trials. Read-only
    # here: never save a Run over them. No CHECK constraints: a count must never refuse a
    # trial's write.
    trials_total = models.IntegerField(default=0, editable=False)
    trials_queued = models.IntegerField(default=0, editable=False)
    trials_passed = models.IntegerField(default=0, editable=False)
    trials_failed = models.IntegerField(default=0, editable=False)
    trials_timed_out = models.IntegerField(default=0, editable=False)
    trials_errored = models.IntegerField(default=0, editable=False)
    trials_running = models.IntegerField(default=0, editable=False)
    # Trials whose conversation stopped or never left planning (validity warnings).
    trials_stopped_or_planning = models.IntegerField(default=0, editable=False)
    trials_tokens = models.BigIntegerField(default=0, editable=False)  # input + output
    trials_duration_ms = models.BigIntegerField(default=0, editable=False)
    trials_timed = models.IntegerField(default=0, editable=False)  # with a duration
    trials_retried = models.IntegerField(default=0, editable=False)  # attempt > 1
    trials_last_attempt = models.IntegerField(default=0, editable=False)
    trials_costed = models.IntegerField(default=0, editable=False)  # with a cost
    trials_cost_usd = models.FloatField(default=0.0, editable=False)
    trials_budget_exhausted = models.IntegerField(default=0, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["batch", "case_version", "variant"], name="run_unique_in_batch"
            )
        ]
        ordering = ["batch", "id"]
        indexes = [
            # validity_warnings' "runs of this batch with a conversation cut short"
            models.Index(
                fields=["batch"],
                condition=models.Q(trials_stopped_or_planning__gt=0),
                name="run_with_cut_short_trials",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk}"

    def save(self, *args, **kwargs) -> None:
        # The trial counts are the triggers' to write: saving a run read earlier (the admin's
        # form) must not put back the counts it read.
        if not self._state.adding and kwargs.get("update_fields") is None:
            kwargs["update_fields"] = [
                f.name
                for f in self._meta.concrete_fields
                if not f.primary_key and not f.name.startswith("trials_")
            ]
        super().save(*args, **kwargs)

    @classmethod
    def for_running(cls, run_id: int, identity: tuple | None = None) -> tuple[Run, bool]:
        """The run with its batch, case version and variant, as a claimed trial needs them,
        and whether they were read from the database now (rather than kept from before).

        A process claims many trials of one run: the rows are read once and kept, since none of
        what a trial reads from them changes once the batch is made (its status is not read from
        here). The run's ``identity`` (RUN_IDENTITY's values, which the claim reads with its
        UPDATE; else one small query here) checks that the kept rows are still the run's: a
        database emptied and filled again reuses ids."""
        if identity is None:
            rows = hot_sql.execute(_RUN_IDENTITY_SQL, [run_id], fetch=True)
            identity = tuple(rows[0]) if rows else None
        with _kept_runs_lock:
            kept = _kept_runs.get(run_id)
        if kept is not None and identity is not None and kept[0] == identity:
            return kept[1], False
        run = cls.objects.select_related("case_version__case", "variant", "batch").get(pk=run_id)
        with _kept_runs_lock:
            if len(_kept_runs) >= KEPT_RUNS:
                _kept_runs.pop(next(iter(_kept_runs)))
            if identity is not None:
                _kept_runs[run_id] = (identity, run)
        return run, True


# Runs kept by Run.for_running, oldest first, with what identifies them.
KEPT_RUNS = 256
# What identifies a run: its batch, case version and variant, and when its batch was made.
_RUN_IDENTITY_COLUMNS = ("r.batch_id", "r.case_version_id", "r.variant_id", "b.created_at")
_RUN_WITH_BATCH = (
    f"FROM {Run._meta.db_table} r JOIN {Batch._meta.db_table} b ON b.id = r.batch_id "
    "WHERE r.id = {run}"
)
_RUN_IDENTITY_SQL = f"SELECT {', '.join(_RUN_IDENTITY_COLUMNS)} " + _RUN_WITH_BATCH.format(run="%s")
# The same, as one SQL expression per column, where ``{run}`` is the run's id.
RUN_IDENTITY = tuple(f"(SELECT {column} {_RUN_WITH_BATCH})" for column in _RUN_IDENTITY_COLUMNS)
_kept_runs: dict[int, tuple[tuple, Run]] = {}
_kept_runs_lock = threading.Lock()


class TrialQuerySet(models.QuerySet["Trial"]):
    def held_by(self, owner: str) -> TrialQuerySet:
        """The trials ``owner`` still holds: the lease fence (``Trial.lease_fence``) as a
        filter. Every write a process makes to a trial it runs is conditional on it."""
        return self.filter(**Trial.lease_fence(owner))


class Trial(models.Model):
    """One attempt in its own fresh sandbox."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        PASSED = "passed"
        FAILED = "failed"
        TIMED_OUT = "timed_out"
        ERRORED = "errored"
        # Its batch's budget was reached before it ended (or started): neither a result about
        # the agent nor an infrastructure failure, and left out of every pass rate.
        BUDGET_EXHAUSTED = "budget_exhausted"

    # The outcomes a pass rate counts.
    FINAL_STATUSES = (Status.PASSED, Status.FAILED, Status.TIMED_OUT, Status.ERRORED)
    # Every status a trial ends in: nothing runs it any more.
    ENDED_STATUSES = (*FINAL_STATUSES, Status.BUDGET_EXHAUSTED)
    # The rest, named for queries: the (run, status) index seeks them, where excluding the
    # final ones steps over every finished trial of a run first.
    UNFINISHED_STATUSES = (Status.QUEUED, Status.RUNNING)

    # No index of its own: the unique (run, index) constraint's index leads with the run.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="trials", db_index=False)
    index = models.PositiveIntegerField()
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    finish_reason = models.CharField(max_length=200, blank=True, default="")
    error = models.TextField(blank=True, default="")
    answer = models.TextField(blank=True, default="")
    session_id = models.CharField(max_length=200, blank=True, default="")
    # The conversation's own record: completed, or stopped with a cause.
    conversation_outcome = models.CharField(max_length=40, blank=True, default="")
    stop_cause = models.CharField(max_length=60, blank=True, default="")
    # Why the responder produced no usable reply, when stop_cause is responder_cannot_answer.
    responder_cause = models.CharField(max_length=40, blank=True, default="")
    # Plan mode: "" (not a plan-mode case), "planning" (never left it) or "approved".
    plan_state = models.CharField(max_length=20, blank=True, default="")
    plan_signal = models.CharField(max_length=20, blank=True, default="")
    # Files the agent changed outside its workspace and home (local sandbox audit).
    outside_writes = models.JSONField(default=list, blank=True)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_tokens = models.PositiveBigIntegerField(default=0)
    cache_write_tokens = models.PositiveBigIntegerField(default=0)
    # What the trial cost in US dollars: as the harness reported it, else usage x the price
    # table (evals_app.cost); null when neither is known.
    cost_usd = models.FloatField(null=True, blank=True)
    # The weighted score of the trial's assertions, and the threshold it was held to.
    score = models.FloatField(null=True, blank=True)
    threshold = models.FloatField(null=True, blank=True)
    queued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveBigIntegerField(null=True, blank=True)
    artifacts_dir = models.CharField(max_length=1000, blank=True, default="")
    # Which run of the trial this is: 1, then 2 after its worker was lost and it was re-queued.
    attempt = models.PositiveIntegerField(default=1)
    # The lease of a running trial: the process running it ("host:pid:random") renews the
    # expiry while it lives; once it lapses the reaper re-queues or ends the trial.
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # The sandboxes of this trial that live with a provider, as [kind, id] pairs, written as
    # each is created: the reaper kills them when the worker running the trial died.
    remote_sandboxes = models.JSONField(default=list, blank=True)

    objects = TrialQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="trial_index_unique_in_run")
        ]
        ordering = ["run", "index"]
        indexes = [
            # the reaper's "running trials whose lease expired", and (led by the status) what
            # `serve` re-queues: trials left queued or running
            models.Index(fields=["status", "lease_expires_at"], name="trial_lease"),
            # counts by status of a batch's runs (API lists, the grid's warnings): index only
            models.Index(fields=["run", "status"], name="lean_trial_status_in_run"),
        ]

    def __str__(self) -> str:
        return f"trial {self.pk}"

    @property
    def is_final(self) -> bool:
        """Nothing runs the trial any more (its budget_exhausted end included)."""
        return self.status in self.ENDED_STATUSES

    # What a run leaves on a trial row, and the value that means "not run yet".
    RECORD_DEFAULTS: dict = {
        "started_at": None,
        "artifacts_dir": "",
        "finished_at": None,
        "error": "",
        "answer": "",
        "finish_reason": "",
        "session_id": "",
        "conversation_outcome": "",
        "stop_cause": "",
        "responder_cause": "",
        "plan_state": "",
        "plan_signal": "",
        "outside_writes": [],
        "score": None,
        "threshold": None,
        "duration_ms": None,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "cost_usd": None,
    }

    # Set on a trial its worker lost for good (the reaper, after the attempts are spent).
    WORKER_LOST = "worker_lost"

    @classmethod
    def lease_fence(cls, owner: str) -> dict[str, Any]:
        """The condition "``owner`` still holds this trial's lease", as the column values it
        requires: the one definition of the fence. The ORM's writes filter by it
        (``Trial.objects.held_by``); the hot path's statements put it in their WHERE
        (``hot_sql.update_where(Trial, values, {"pk": trial_id, **Trial.lease_fence(owner)})``).
        A trial re-queued, taken over by another claim or ended meanwhile fails it."""
        return {"status": cls.Status.RUNNING, "lease_owner": owner}

    def lease_expired(self, now=None) -> bool:
        """A running trial nobody renews: no lease (left by a version without leases) or one
        whose expiry passed."""
        return self.lease_expires_at is None or self.lease_expires_at <= (now or timezone.now())

    @classmethod
    def claim(cls, trial_id: int, owner: str, *, lease_s: float, max_attempts: int) -> Trial | None:
        """Take a trial to run it under ``owner``'s lease (and start its batch): a queued one,
        or a running one whose lease expired (a message redelivered after its worker died: its
        partial record is forgotten and the attempt counted) while attempts are left. None
        otherwise (taken by a live process, or finished), so a task delivered twice runs the
        trial once."""
        now = timezone.now()
        expires = now + timedelta(seconds=lease_s)
        # The usual case, a queued trial, in one UPDATE (no lock taken beforehand); the row it
        # returns says whether this caller took it.
        taken = hot_sql.update_where(
            cls,
            {
                "status": cls.Status.RUNNING,
                "started_at": now,
                "lease_owner": owner,
                "lease_expires_at": expires,
            },
            {"pk": trial_id, "status": cls.Status.QUEUED},
            returning=("run", "index", "attempt"),
            # The run's identity too, which spares Run.for_running a query of its own.
            also_returning=_CLAIMED_RUN_IDENTITY,
        )
        if taken:
            [(run_id, index, attempt, *identity)] = taken  # type: ignore[misc]
            run, read_now = Run.for_running(run_id, tuple(identity))
            if read_now:
                # A batch never goes back to queued: once per run and process is enough, and
                # only the batch's first trial finds it queued.
                hot_sql.update_where(
                    Batch,
                    {"status": Batch.Status.RUNNING},
                    {"pk": run.batch_id, "status": Batch.Status.QUEUED},
                )
            # As a query of just these columns would make it: the trial's path reads no other
            # (one that did would load it then), and a whole instance took 30 µs to make.
            known = {
                "id": trial_id,
                "run_id": run_id,
                "index": index,
                "attempt": attempt,
                "status": cls.Status.RUNNING,
                "started_at": now,
                "lease_owner": owner,
                "lease_expires_at": expires,
            }
            taken_trial = cls.from_db(
                DEFAULT_DB_ALIAS, _CLAIMED_COLUMNS, [known[name] for name in _CLAIMED_COLUMNS]
            )
            taken_trial.run = run
            return taken_trial
        with transaction.atomic():
            trial = cls.objects.select_for_update().filter(pk=trial_id).first()
            if trial is None:
                return None
            now = timezone.now()
            if trial.status == cls.Status.RUNNING and trial.lease_expired(now):
                if trial.attempt >= max_attempts:
                    return None  # the reaper ends it as worker_lost
                trial.reset()
                trial.attempt += 1
            elif trial.status != cls.Status.QUEUED:
                return None
            trial.status = cls.Status.RUNNING
            trial.started_at = now
            trial.lease_owner = owner
            trial.lease_expires_at = now + timedelta(seconds=lease_s)
            trial.save(
                update_fields=["status", "started_at", "attempt", "lease_owner", "lease_expires_at"]
            )
            Batch.objects.filter(pk=trial.run.batch_id, status=Batch.Status.QUEUED).update(
                status=Batch.Status.RUNNING
            )
        trial.run, _ = Run.for_running(trial.run_id)
        return trial

    @classmethod
    def renew_leases(
        cls, owner: str, trial_ids, *, lease_s: float, artifacts_dir: str | None = None
    ) -> int:
        """Push the expiry of ``owner``'s running trials among ``trial_ids`` forward, in one
        UPDATE fenced by the lease: the heartbeat's for every trial a process holds, and a
        recorder's flush for its one trial, in the flush's transaction (the row lock it takes
        holds off any other claim until the flush commits). How many were renewed: a trial
        re-queued or taken over meanwhile is not. ``artifacts_dir`` (a trial's first flush)
        names its folder in the same statement."""
        values: dict[str, Any] = {"lease_expires_at": timezone.now() + timedelta(seconds=lease_s)}
        if artifacts_dir is not None:
            values["artifacts_dir"] = artifacts_dir
        return cls.objects.filter(pk__in=list(trial_ids)).held_by(owner).update(**values)

    @classmethod
    def reap_expired(
        cls, *, max_attempts: int, exclude_ids=(), batch_id: int | None = None
    ) -> tuple[list[Trial], list[Trial]]:
        """Find the running trials whose lease expired (their worker died): re-queue each while
        attempts are left (its partial record forgotten, ``attempt`` counted), else end it
        errored with finish_reason ``worker_lost``. Returns (re-queued, ended); the caller
        enqueues the first after the commit and closes the batches. ``exclude_ids``: trials
        this process itself runs, never taken from it."""
        now = timezone.now()
        requeued: list[Trial] = []
        ended: list[Trial] = []
        with transaction.atomic():
            expired = (
                cls.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(status=cls.Status.RUNNING)
                .filter(
                    models.Q(lease_expires_at__lte=now) | models.Q(lease_expires_at__isnull=True)
                )
                .exclude(pk__in=list(exclude_ids))
                .select_related("run")
                .order_by("pk")
            )
            if batch_id is not None:
                expired = expired.filter(run__batch_id=batch_id)
            for trial in expired:
                if trial.attempt < max_attempts:
                    trial.reset()
                    trial.attempt += 1
                    trial.queued_at = now
                    trial.save(update_fields=["attempt", "queued_at"])
                    requeued.append(trial)
                else:
                    lost_at = trial.lease_expires_at or trial.started_at or now
                    error = (
                        f"The worker running this trial ({trial.lease_owner or 'unknown'}) "
                        f"stopped renewing its lease at {lost_at:%Y-%m-%d %H:%M:%S} UTC, on "
                        f"attempt {trial.attempt} of {max_attempts}; no attempts are left."
                    )
                    cls.objects.filter(pk=trial.pk).update(
                        status=cls.Status.ERRORED,
                        finish_reason=cls.WORKER_LOST,
                        error=error,
                        finished_at=now,
                        lease_owner="",
                        lease_expires_at=None,
                    )
                    trial.status = cls.Status.ERRORED
                    ended.append(trial)
        return requeued, ended

    def finish(self, status: str, *, owner: str | None = None, **record) -> bool:
        """Record the trial's end (see :meth:`record_finish`) and set it on this instance."""
        written = self.record_finish(self.pk, status, owner=owner, **record)
        if written is None:
            return False
        self.status = status
        for key, value in written.items():
            setattr(self, key, value)
        return True

    @classmethod
    def record_finish(
        cls, trial_id: int, status: str, *, owner: str | None = None, **record
    ) -> dict[str, Any] | None:
        """Record the end of the trial ``trial_id``: its final status and what the run left
        (``RECORD_DEFAULTS`` names the fields; ``usage`` may give the token counts as one dict),
        and release its lease. With ``owner``, only while that process still holds the lease:
        a run whose trial was re-queued meanwhile records nothing (None) and leaves the new run
        alone. Returns the fields written. A class method: the worker ends a trial by its id
        alone, and making a model instance of the trial's two dozen fields cost more than the
        UPDATE."""
        usage = record.pop("usage", None) or {}
        for key in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
            record.setdefault(key, usage.get(key, 0))
        unknown = set(record) - set(cls.RECORD_DEFAULTS)
        if unknown:
            raise TypeError(f"Trial.finish got unknown fields: {', '.join(sorted(unknown))}")
        record["finish_reason"] = (record.get("finish_reason") or "")[:200]
        record["session_id"] = (record.get("session_id") or "")[:200]
        record["finished_at"] = timezone.now()
        fence: dict[str, Any] = {"pk": trial_id}
        if owner is not None:
            fence.update(cls.lease_fence(owner))
        values = {"status": status, "lease_owner": "", "lease_expires_at": None, **record}
        if not hot_sql.update_where(Trial, values, fence):
            return None
        return record

    @classmethod
    def end_unfinished(cls, trials: models.QuerySet, *, reason: str, error: str) -> int:
        """End every trial of ``trials`` that is not final as errored, saying why."""
        return trials.exclude(status__in=cls.ENDED_STATUSES).update(
            status=cls.Status.ERRORED,
            finish_reason=reason,
            error=error,
            finished_at=timezone.now(),
            lease_owner="",
            lease_expires_at=None,
        )

    @classmethod
    def add_remote_sandbox(cls, trial_id: int, kind: str, remote_id: str) -> None:
        """Record that ``trial_id`` now has the sandbox ``remote_id`` of ``kind`` elsewhere."""
        with transaction.atomic():
            trial = cls.objects.select_for_update().only("remote_sandboxes").get(pk=trial_id)
            cls.objects.filter(pk=trial_id).update(
                remote_sandboxes=[*trial.remote_sandboxes, [kind, remote_id]]
            )

    def reset(self) -> None:
        """Forget the trial's partial record so it can run again from the start (after a crash):
        queued, with no events, turns, checks, consultations or mock calls, and no lease. ``attempt`` is
        kept (the caller counts a new one)."""
        with transaction.atomic():
            # The row first: its UPDATE waits for a flush that holds the row's lock (the
            # flush's renewal took it) to commit, and ends the lease that flush was fenced by.
            # The deletes after it see every row that flush wrote, and no later flush of the
            # old holder writes any (on PostgreSQL a delete made first missed the rows of a
            # flush committing meanwhile, which stayed in the new run's history).
            Trial.objects.filter(pk=self.pk).update(
                status=Trial.Status.QUEUED,
                lease_owner="",
                lease_expires_at=None,
                **self.RECORD_DEFAULTS,
            )
            self.events.all().delete()
            self.turns.all().delete()
            self.checks.all().delete()
            self.consultations.all().delete()
            # The mock calls the lost run stored would stand for the next run's (its rows of
            # the same seq are kept as stored).
            self.mock_calls.all().delete()
        self.status = Trial.Status.QUEUED
        self.lease_owner, self.lease_expires_at = "", None
        for key, value in self.RECORD_DEFAULTS.items():
            setattr(self, key, list(value) if isinstance(value, list) else value)

    @property
    def worker_lost_note(self) -> str:
        """What the trial page and the grid cell say of a trial whose worker was lost."""
        if self.finish_reason == self.WORKER_LOST:
            return f"worker lost, no attempts left (attempt {self.attempt})"
        if self.attempt > 1:
            return f"worker lost, retried (attempt {self.attempt})"
        return ""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


# The columns Trial.claim knows of the trial it took, in the model's order of fields (as
# from_db takes its values).
_CLAIMED = {
    "id",
    "run_id",
    "index",
    "attempt",
    "status",
    "started_at",
    "lease_owner",
    "lease_expires_at",
}
_CLAIMED_COLUMNS = [f.attname for f in Trial._meta.concrete_fields if f.attname in _CLAIMED]
# RUN_IDENTITY of the run of the trial that an UPDATE of the trial table changes (standard SQL
# quoting, which both databases take).
_CLAIMED_RUN_IDENTITY = tuple(
    expression.format(run=f'"{Trial._meta.db_table}"."run_id"') for expression in RUN_IDENTITY
)


class UnsentTrial(models.Model):
    """A trial committed as queued whose message the broker has not taken yet (the scaled
    mode's outbox). Written in the transaction that queues the trial, deleted once the message
    is sent; the reaper re-sends what is left (Redis was down, the sender died after the
    commit). A message sent twice runs the trial once: ``Trial.claim`` takes only a queued one."""

    trial = models.OneToOneField(
        Trial, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    since = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"unsent trial {self.trial_id}"


class Turn(models.Model):
    """One user message and everything the agent did until it answered."""

    # No index of its own: the unique (trial, index) constraint's index leads with the trial.
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="turns", db_index=False)
    index = models.PositiveIntegerField()
    prompt = models.TextField()
    # Who wrote the message: empty for authored turns, else {"responder": ...} / {"runner": ...}.
    origin = models.JSONField(default=dict, blank=True)
    mode = models.CharField(max_length=10, blank=True, default="")
    answer = models.TextField(blank=True, default="")
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["trial", "index"], name="turn_index_unique_in_trial")
        ]
        ordering = ["trial", "index"]

    def __str__(self) -> str:
        return f"turn {self.index} of trial {self.trial_id}"


class Event(models.Model):
    """A normalized record of what the agent did, in the order it happened."""

    class Kind(models.TextChoices):
        STARTED = "Started"
        MESSAGE = "Message"
        COMMAND = "Command"
        TOOL_CALL = "ToolCall"
        FILE_CHANGE = "FileChange"
        USAGE = "Usage"
        FINISHED = "Finished"
        PROTOCOL_ERROR = "ProtocolError"
        LOG = "Log"

    # No foreign key in the database, and no index of its own (the unique (trial, seq) index
    # serves every lookup by trial). Events are written only by a trial's recorder, in a flush
    # whose first statement is the lease-fenced UPDATE of that trial's row: the row exists and
    # stays locked against deletion until the flush commits. A database constraint proved it
    # again row by row at each commit, 40% of PostgreSQL's work per stored event. Deleting a
    # trial still deletes its events (Django's on_delete), as before.
    trial = models.ForeignKey(
        Trial,
        on_delete=models.CASCADE,
        related_name="events",
        db_constraint=False,
        db_index=False,
    )
    turn_index = models.PositiveIntegerField(default=0)
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=20, choices=Kind.choices)
    at = models.DateTimeField()
    data = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["trial", "seq"], name="event_seq_unique_in_trial")
        ]
        ordering = ["trial", "seq"]

    def __str__(self) -> str:
        return f"{self.kind} #{self.seq} of trial {self.trial_id}"


class Check(models.Model):
    """The result of one validator, judge or assertion on one trial."""

    # No index of its own: the unique (trial, index) constraint's index leads with the trial.
    trial = models.ForeignKey(
        Trial, on_delete=models.CASCADE, related_name="checks", db_index=False
    )
    index = models.PositiveIntegerField()
    name = models.CharField(max_length=300)
    kind = models.CharField(max_length=30)
    passed = models.BooleanField()
    score = models.FloatField(null=True, blank=True)
    # Weighted assertions: how much this check counts (0: information only) and the metric it
    # is charted under.
    weight = models.FloatField(null=True, blank=True)
    metric = models.CharField(max_length=100, blank=True, default="")
    message = models.TextField(blank=True, default="")
    output = models.TextField(blank=True, default="")
    # Key into the case version's captured sources and the line span of this check's code.
    source_ref = models.JSONField(default=dict, blank=True)
    duration_ms = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["trial", "index"], name="check_index_unique_in_trial")
        ]
        ordering = ["trial", "index"]

    def __str__(self) -> str:
        return f"{self.name}: {'passed' if self.passed else 'failed'}"


class Consultation(models.Model):
    """One call of the responder, a judge or a simulated user: what it was shown, what it said.

    Kept so a verdict can be audited without rerunning anything.
    """

    class Kind(models.TextChoices):
        RESPONDER = "responder"
        JUDGE = "judge"
        SIMULATED_USER = "simulated_user"

    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="consultations")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    # The conversation round it followed (responder, simulated user) or the check it graded.
    turn_index = models.PositiveIntegerField(null=True, blank=True)
    check_index = models.PositiveIntegerField(null=True, blank=True)
    model = models.CharField(max_length=200, blank=True, default="")
    prompt = models.JSONField(default=list)
    answer = models.TextField(blank=True, default="")
    verdict = models.CharField(max_length=40, blank=True, default="")
    reason = models.TextField(blank=True, default="")
    cause = models.CharField(max_length=40, blank=True, default="")
    duration_ms = models.PositiveBigIntegerField(default=0)
    # The tokens the call used ({"input_tokens", "output_tokens"}), as the endpoint said.
    usage = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["trial", "created_at", "id"]

    def __str__(self) -> str:
        return f"{self.kind} consultation of trial {self.trial_id}"


class MockCall(models.Model):
    """One call the agent made to a mock of its trial (runner.mocks): an HTTP request (api), a
    command run (cli) or a tool call (mcp), headers' secrets redacted. ``record`` holds the
    whole logged call (runner.core.mock_calls.MockCall as JSON)."""

    class Kind(models.TextChoices):
        API = "api"
        CLI = "cli"
        MCP = "mcp"

    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="mock_calls")
    mock = models.CharField(max_length=40)
    kind = models.CharField(max_length=3, choices=Kind.choices)
    # Order within its mock.
    seq = models.PositiveIntegerField()
    at = models.DateTimeField()
    method = models.CharField(max_length=40, blank=True, default="")
    path = models.CharField(max_length=500, blank=True, default="")
    # HTTP status (api, mcp) or exit code (cli).
    status = models.IntegerField(null=True, blank=True)
    duration_ms = models.PositiveBigIntegerField(default=0)
    record = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["trial", "mock", "seq"], name="mock_call_seq_unique_in_trial"
            )
        ]
        ordering = ["trial", "at", "id"]

    def __str__(self) -> str:
        return f"{self.mock} {self.method} {self.path} of trial {self.trial_id}"


class TrialLabel(models.Model):
    """A person's reading of a trial: passed or failed, with an optional note. What a model
    judge's verdicts are checked against (evals_app.judge_agreement). A label belongs to the
    organization of the trial and stays with that trial: a rerun makes new trials and leaves
    it, and labelling the trial again replaces it."""

    class Verdict(models.TextChoices):
        PASSED = "passed"
        FAILED = "failed"

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="trial_labels"
    )
    trial = models.OneToOneField(Trial, on_delete=models.CASCADE, related_name="human_label")
    verdict = models.CharField(max_length=10, choices=Verdict.choices)
    note = models.TextField(blank=True, default="")
    labelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    labelled_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["labelled_at", "id"]

    def __str__(self) -> str:
        return f"{self.verdict} label of trial {self.trial_id}"
