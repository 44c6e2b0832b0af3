"""`proctor seed-demo-data`: fill the database with a realistic, finished batch to look at and to
measure the dashboard against (500 cases x 8 variants x 5 trials in well under a minute).

Everything is made with ``bulk_create`` inside one transaction, a slice of runs at a time, so
memory stays flat and SQLite writes once. The numbers come from a seeded random generator: the
same options make the same data.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import Model
from django.utils import timezone

from evals_app.models import (
    Batch,
    Case,
    CaseVersion,
    Check,
    Event,
    Organization,
    Run,
    Suite,
    Trial,
    Turn,
    Variant,
)
from evals_app.resolution import canonical_hash
from runner.jobs.database import ensure_database

ORGANIZATION_SLUG = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
SUITES = [
    ("api", "HTTP API"),
    ("web", "Web front end"),
    ("cli", "Command-line tools"),
    ("data", "Data pipelines"),
    ("refactor", "Refactoring"),
    ("infra", "Infrastructure"),
]
TOPICS = [
    "health-route",
    "login-form",
    "rate-limit",
    "csv-export",
    "retry-backoff",
    "pagination",
    "search-box",
    "dark-mode",
    "config-loader",
    "cache-layer",
    "migration",
    "flaky-test",
    "type-hints",
    "dead-code",
    "docker-build",
    "log-rotation",
]
TAGS = ["http", "smoke", "ui", "db", "auth", "perf", "python", "typescript", "refactor", "flaky"]
VARIANT_KINDS = [
    ("claude-code", "claude-sonnet-4-5"),
    ("codex", "gpt-5-codex"),
    ("claude-code", "claude-opus-4-1"),
    ("gemini", "gemini-2.5-pro"),
    ("opencode", "qwen3-coder"),
    ("aider", "deepseek-chat"),
    ("codex", "gpt-5-mini"),
    ("command", "scripted"),
]
# Runs are written this many at a time: their trials, checks, turns and events stay in memory
# only until the slice is saved.
RUNS_PER_SLICE = 250
FAILURE_KINDS = (
    [Trial.Status.FAILED] * 15 + [Trial.Status.TIMED_OUT] * 3 + [Trial.Status.ERRORED] * 2
)
INFRASTRUCTURE_ERRORS = [
    "The sandbox could not be created: no space left on device.",
    "The harness did not start: the agent CLI exited with status 127.",
    "prepare failed: npm ci exited with status 1.",
]


def insert_rows(model: type[Model], rows: list[dict]) -> None:
    """INSERT rows given as {field name: value} without building model instances.

    Building and compiling one model object per row is most of the time of a 100,000-row
    seed. Each value still goes through its field's own preparation, so JSON and datetimes are
    stored exactly as the ORM stores them. Every row must name every column without a default
    in the database (all of them, in practice).
    """
    if not rows:
        return
    # The connection itself, not the thread-local proxy: it is consulted for every value.
    db = connections[DEFAULT_DB_ALIAS]
    by_name = {field.name: field for field in model._meta.concrete_fields}
    # Columns a row leaves out take their field's default, so a field added to the model later
    # does not break the seed.
    defaults = {
        name: field.get_default()
        for name, field in by_name.items()
        if name not in rows[0] and not field.primary_key and field.has_default()
    }
    if defaults:
        rows = [{**defaults, **row} for row in rows]
    names = list(rows[0])
    fields = [by_name[name] for name in names]
    quote = db.ops.quote_name
    columns = ", ".join(quote(cast(str, field.column)) for field in fields)
    one_row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    values = [
        [field.get_db_prep_save(row[name], db) for field, name in zip(fields, names, strict=True)]
        for row in rows
    ]
    # Many rows per statement (one round trip each), within the database's parameter limit.
    per_statement = min(1000, db.ops.bulk_batch_size(fields, rows))
    with db.cursor() as cursor:
        for start in range(0, len(values), per_statement):
            chunk = values[start : start + per_statement]
            cursor.execute(
                f"INSERT INTO {quote(model._meta.db_table)} ({columns}) "
                f"VALUES {', '.join([one_row] * len(chunk))}",
                [value for row in chunk for value in row],
            )


@dataclass
class SeededCase:
    case: Case
    version: CaseVersion
    difficulty: float


class Command(BaseCommand):
    help = "Fill the database with a demo organization and one finished batch of made-up results."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cases", type=int, default=500, help="How many cases (default 500).")
        parser.add_argument(
            "--variants", type=int, default=8, help="How many variants (default 8)."
        )
        parser.add_argument("--trials", type=int, default=5, help="Trials per run (default 5).")
        parser.add_argument(
            "--org", default="demo", help="Slug of the organization to fill (default demo)."
        )
        parser.add_argument(
            "--seed", type=int, default=1, help="Random seed; the same seed makes the same data."
        )

    def handle(
        self, *args, cases: int, variants: int, trials: int, org: str, seed: int, **options
    ) -> None:
        for name, value in (("--cases", cases), ("--variants", variants), ("--trials", trials)):
            if value < 1:
                raise CommandError(f"{name} must be 1 or more, not {value}.")
        if not ORGANIZATION_SLUG.fullmatch(org):
            raise CommandError(f"--org must be lowercase letters, digits and hyphens, not {org!r}.")
        ensure_database()  # a new PROCTOR_HOME has no tables yet
        started = time.monotonic()
        with transaction.atomic():
            organization, created = Organization.objects.get_or_create(
                slug=org, defaults={"name": org.replace("-", " ").title()}
            )
            if not created and organization.cases.exists():
                raise CommandError(
                    f"Organization {org!r} already has cases; seed another one with --org."
                )
            seeder = DemoSeeder(organization, random.Random(seed))
            seeded_cases = seeder.make_cases(cases)
            seeded_variants = seeder.make_variants(variants)
            batch = seeder.make_batch(seeded_cases, seeded_variants, trials)
        elapsed = time.monotonic() - started
        statuses = ", ".join(
            f"{count:,} {status}" for status, count in sorted(seeder.statuses.items())
        )
        self.stdout.write(
            f"Seeded organization {organization.slug!r} in {elapsed:.1f} s: "
            f"{seeder.suite_count} suites, {len(seeded_cases):,} cases "
            f"({seeder.version_count:,} versions), {len(seeded_variants)} variants, "
            f"batch {batch.pk} with {len(seeded_cases) * len(seeded_variants):,} runs and "
            f"{sum(seeder.statuses.values()):,} trials ({statuses}), "
            f"{seeder.check_count:,} checks, {seeder.event_count:,} events."
        )
        self.stdout.write(
            "Members of that organization see it in the dashboard; add one with the admin "
            "(Organizations) or `proctor createuser`."
        )


class DemoSeeder:
    """Makes the rows; keeps counts of what it made for the summary."""

    def __init__(self, organization: Organization, rng: random.Random) -> None:
        self.organization = organization
        self.rng = rng
        self.now = timezone.now()
        self.suite_count = 0
        self.version_count = 0
        self.check_count = 0
        self.event_count = 0
        self.statuses: Counter[str] = Counter()

    # --- what was defined ---------------------------------------------------------------------

    def make_cases(self, count: int) -> list[SeededCase]:
        suite_total = min(len(SUITES), max(1, math.ceil(count / 80)))
        suites = Suite.objects.bulk_create(
            Suite(
                organization=self.organization,
                slug=slug,
                name=name,
                created_at=self.now - timedelta(days=30),
            )
            for slug, name in SUITES[:suite_total]
        )
        self.suite_count = len(suites)
        cases = Case.objects.bulk_create(
            Case(
                organization=self.organization,
                suite=suites[index % len(suites)],
                slug=f"{TOPICS[index % len(TOPICS)]}-{index + 1:03d}",
                name=f"{TOPICS[index % len(TOPICS)].replace('-', ' ').capitalize()} #{index + 1}",
                tags=self.rng.sample(TAGS, self.rng.randint(1, 3)),
                created_at=self.now - timedelta(days=30),
            )
            for index in range(count)
        )
        versions: list[CaseVersion] = []
        for case in cases:
            for number in range(1, self.rng.randint(1, 3) + 1):
                definition = self._definition(case, number)
                versions.append(
                    CaseVersion(
                        case=case,
                        number=number,
                        definition=definition,
                        definition_hash=canonical_hash(definition),
                        sources={self._eval_path(case): self._eval_source(case, number)},
                        module_path=f"/srv/{self.organization.slug}/{self._eval_path(case)}",
                        created_at=self.now - timedelta(days=30 - 7 * number),
                    )
                )
        CaseVersion.objects.bulk_create(versions, batch_size=500)
        self.version_count = len(versions)
        latest = {version.case_id: version for version in versions}  # numbers ascend per case
        return [SeededCase(case, latest[case.pk], self.rng.random()) for case in cases]

    def _eval_path(self, case: Case) -> str:
        return f"evals/{case.suite.slug}.eval.py"

    def _eval_source(self, case: Case, number: int) -> str:
        route = case.slug.rsplit("-", 1)[0]
        strict = (
            "\n    assert response.headers['content-type'] == 'application/json'"
            if number >= 3
            else ""
        )
        return (
            f'"""Evals of the {case.suite.name} suite (version {number})."""\n'
            "\n"
            "from proctor import case, command, suite\n"
            "\n"
            "\n"
            f"def {self._validator_name(case)}(workspace):\n"
            f'    """The agent added the {route} behaviour."""\n'
            f"    response = workspace.http_get('/{route}')\n"
            f"    assert response.status == 200{strict}\n"
        )

    def _validator_name(self, case: Case) -> str:
        return "has_" + case.slug.rsplit("-", 1)[0].replace("-", "_")

    def _definition(self, case: Case, number: int) -> dict:
        """Version 1, then a longer timeout (2), then a stricter validator and a lint check (3)."""
        source_text = self._eval_source(case, number)
        validator_end = len(source_text.splitlines())
        checks: list[dict] = [
            {"kind": "command", "name": "pytest -q", "command": "pytest -q", "timeout_ms": 600000},
            {
                "kind": "validator",
                "name": self._validator_name(case),
                "qualname": self._validator_name(case),
                "path": self._eval_path(case),
                "start": 6,
                "end": validator_end,
                "sha256": canonical_hash(source_text),
            },
        ]
        if number >= 3:
            checks.append(
                {
                    "kind": "command",
                    "name": "ruff check .",
                    "command": "ruff check .",
                    "timeout_ms": 120000,
                }
            )
        topic = case.slug.rsplit("-", 1)[0].replace("-", " ")
        return {
            "suite": case.suite.slug,
            "case": case.slug,
            "prompt": f"Implement the {topic} feature described in TASK.md and keep the tests green.",
            "system_prompt": None,
            "source": {
                "kind": "repo",
                "url": f"https://github.com/example/{case.suite.slug}-app",
                "ref": "main",
            },
            "prepare": None,
            "cache": None,
            "limits": {"max_turns": 8, "timeout_ms": 900000 if number == 1 else 1800000},
            "conversation": {"user": None, "expected_output": None, "plan_mode": False},
            "checks": checks,
        }

    def make_variants(self, count: int) -> list[tuple[Variant, float]]:
        """Variants with a made-up skill each, so the grid has better and worse columns."""
        rows = []
        for index in range(count):
            harness, model = VARIANT_KINDS[index % len(VARIANT_KINDS)]
            name = f"{harness}/{model}" + (
                f" #{index // len(VARIANT_KINDS) + 1}" if index >= len(VARIANT_KINDS) else ""
            )
            spec = {
                "name": name,
                "harness": harness,
                "model": model,
                "sandbox": "local",
                "network": False,
                "profile": None,
                "options": {},
            }
            rows.append(
                Variant(
                    organization=self.organization,
                    name=name,
                    harness=harness,
                    model=model,
                    sandbox="local",
                    spec=spec,
                    spec_hash=canonical_hash(spec),
                    created_at=self.now - timedelta(days=30),
                )
            )
        variants = Variant.objects.bulk_create(rows)
        return [(variant, self.rng.uniform(0.35, 0.95)) for variant in variants]

    # --- what ran --------------------------------------------------------------------------------

    def make_batch(
        self, cases: list[SeededCase], variants: list[tuple[Variant, float]], trials: int
    ) -> Batch:
        created_at = self.now - timedelta(hours=2)
        batch = Batch.objects.create(
            organization=self.organization,
            status=Batch.Status.FINISHED,
            created_at=created_at,
            finished_at=self.now - timedelta(minutes=5),
            label="demo data",
            options={"seeded": True, "trials": trials},
        )
        cells = [(seeded, variant, skill) for seeded in cases for variant, skill in variants]
        for start in range(0, len(cells), RUNS_PER_SLICE):
            self._make_runs(batch, cells[start : start + RUNS_PER_SLICE], trials)
        return batch

    def _make_runs(
        self, batch: Batch, cells: list[tuple[SeededCase, Variant, float]], trials: int
    ) -> None:
        runs = Run.objects.bulk_create(
            Run(batch=batch, case_version=seeded.version, variant=variant, spec=variant.spec)
            for seeded, variant, _ in cells
        )
        trial_rows: list[Trial] = []
        definitions: list[dict] = []
        for run, (seeded, _, skill) in zip(runs, cells, strict=True):
            pass_chance = min(0.97, max(0.03, skill * (1.25 - seeded.difficulty)))
            for index in range(trials):
                trial_rows.append(
                    self._trial(
                        run, index, pass_chance, seeded.version.definition, batch.created_at
                    )
                )
                definitions.append(seeded.version.definition)
        saved = Trial.objects.bulk_create(trial_rows, batch_size=1000)
        if saved and saved[0].pk is None:
            # A database that cannot return ids from a bulk insert: read them back.
            saved_ids = Trial.objects.filter(run__in=runs).values_list("run_id", "index", "id")
            ids = {(run_id, index): pk for run_id, index, pk in saved_ids}
            for trial in saved:
                trial.pk = ids[(trial.run_id, trial.index)]
        checks: list[dict] = []
        turns: list[dict] = []
        events: list[dict] = []
        for trial, definition in zip(saved, definitions, strict=True):
            self.statuses[trial.status] += 1
            checks.extend(self._checks(trial, definition))
            turns.extend(self._turns(trial, definition))
            events.extend(self._events(trial, definition))
        insert_rows(Check, checks)
        insert_rows(Turn, turns)
        insert_rows(Event, events)
        self.check_count += len(checks)
        self.event_count += len(events)

    def _trial(
        self, run: Run, index: int, pass_chance: float, definition: dict, queued_at: datetime
    ) -> Trial:
        rng = self.rng
        status = Trial.Status.PASSED if rng.random() < pass_chance else rng.choice(FAILURE_KINDS)
        timeout_ms = definition["limits"]["timeout_ms"]
        started_at = queued_at + timedelta(seconds=rng.randint(1, 3600))
        trial = Trial(
            run=run, index=index, status=status, queued_at=queued_at, started_at=started_at
        )
        if status == Trial.Status.ERRORED:
            trial.duration_ms = rng.randint(500, 15000)
            trial.error = rng.choice(INFRASTRUCTURE_ERRORS)
            trial.finish_reason = "error"
        else:
            trial.duration_ms = (
                timeout_ms if status == Trial.Status.TIMED_OUT else rng.randint(20000, 480000)
            )
            trial.input_tokens = rng.randint(2000, 60000)
            trial.output_tokens = rng.randint(300, 8000)
            trial.cache_read_tokens = rng.randint(0, trial.input_tokens)
            trial.session_id = f"session-{run.pk}-{index}"
            if status == Trial.Status.TIMED_OUT:
                trial.finish_reason = "timeout"
                trial.conversation_outcome = "timed_out"
            else:
                trial.finish_reason = "end_turn"
                trial.conversation_outcome = "completed"
                trial.answer = "I implemented the change and ran the tests."
                trial.score = 1.0 if status == Trial.Status.PASSED else 0.0
        trial.finished_at = started_at + timedelta(milliseconds=trial.duration_ms)
        return trial

    def _checks(self, trial: Trial, definition: dict) -> list[dict]:
        """Checks ran only on trials that finished their conversation: all pass on a passed
        trial, at least one fails on a failed one."""
        if trial.status not in (Trial.Status.PASSED, Trial.Status.FAILED):
            return []
        count = len(definition["checks"])
        failing = set()
        if trial.status == Trial.Status.FAILED:
            failing = {self.rng.randrange(count)} | {
                i for i in range(count) if self.rng.random() < 0.3
            }
        rows = []
        for index, check in enumerate(definition["checks"]):
            passed = index not in failing
            is_validator = check["kind"] == "validator"
            rows.append(
                {
                    "trial": trial.pk,
                    "index": index,
                    "name": check["name"],
                    "kind": check["kind"],
                    "passed": passed,
                    "score": 1.0 if passed else 0.0,
                    "message": ""
                    if passed
                    else ("expected status 200, got 404" if is_validator else "exit status 1"),
                    "output": ""
                    if is_validator
                    else ("12 passed" if passed else "1 failed, 11 passed"),
                    "source_ref": {k: check[k] for k in ("path", "start", "end", "qualname")}
                    if is_validator
                    else {},
                    "duration_ms": self.rng.randint(50, 20000),
                }
            )
        return rows

    def _turns(self, trial: Trial, definition: dict) -> list[dict]:
        if trial.status == Trial.Status.ERRORED:
            return []
        return [
            {
                "trial": trial.pk,
                "index": 0,
                "prompt": definition["prompt"],
                "origin": {},
                "mode": "",
                "answer": trial.answer,
                "input_tokens": trial.input_tokens,
                "output_tokens": trial.output_tokens,
                "started_at": trial.started_at,
                "finished_at": trial.finished_at,
            }
        ]

    def _events(self, trial: Trial, definition: dict) -> list[dict]:
        assert trial.started_at is not None and trial.finished_at is not None
        if trial.status == Trial.Status.ERRORED:
            shapes: list[tuple[str, dict[str, Any]]] = [
                (Event.Kind.LOG, {"stream": "runner", "text": trial.error})
            ]
        else:
            passed = trial.status == Trial.Status.PASSED
            shapes = [
                (
                    Event.Kind.STARTED,
                    {"session_id": trial.session_id, "model": trial.run.variant.model},
                ),
                (
                    Event.Kind.MESSAGE,
                    {
                        "role": "assistant",
                        "text": "Reading TASK.md and the tests first.",
                        "usage": None,
                    },
                ),
                (
                    Event.Kind.COMMAND,
                    {
                        "command": "pytest -q",
                        "exit_code": 0 if passed else 1,
                        "output": "12 passed" if passed else "1 failed, 11 passed",
                        "origin": "agent",
                    },
                ),
                (Event.Kind.FILE_CHANGE, {"paths": ["app/routes.py", "tests/test_routes.py"]}),
                (
                    Event.Kind.USAGE,
                    {
                        "input_tokens": trial.input_tokens,
                        "output_tokens": trial.output_tokens,
                        "cache_read_tokens": trial.cache_read_tokens,
                        "cache_write_tokens": 0,
                        "total_tokens": trial.input_tokens + trial.output_tokens,
                    },
                ),
                (Event.Kind.FINISHED, {"reason": trial.finish_reason}),
            ]
        step = (trial.finished_at - trial.started_at) / len(shapes)
        return [
            {
                "trial": trial.pk,
                "turn_index": 0,
                "seq": seq,
                "kind": kind,
                "at": trial.started_at + step * seq,
                "data": data,
            }
            for seq, (kind, data) in enumerate(shapes)
        ]
