"""Small explicit builders for the dashboard tests: rows made directly with the ORM.

The fixed cast: alice (owner, org "acme"), bob (member of "acme"), charlie (member of "globex",
no access to acme). ``make_batch_with_grid`` bulk-creates, so a grid of hundreds of cases is
cheap to build.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from django.contrib.auth.models import User
from django.utils import timezone

from evals_app.models import (
    Batch,
    Case,
    CaseVersion,
    Check,
    Consultation,
    Event,
    Organization,
    Run,
    Suite,
    Trial,
    Turn,
    Variant,
)

PASSWORD = "correct-horse-battery"

EVAL_PATH = "evals/api.eval.py"
EVAL_SOURCE = '''"""Acme's API evals."""
from proctor import case, command, suite


def has_health_route(ctx):
    """The app answers /health with 200."""
    text = ctx.read("app.py")
    return "/health" in text


def mentions_tests(ctx):
    return "pytest" in ctx.transcript.text()
'''


@dataclass(frozen=True)
class Cast:
    alice: User
    bob: User
    charlie: User
    acme: Organization
    globex: Organization


def make_org(slug: str) -> Organization:
    return Organization.objects.create(slug=slug, name=slug.title())


def make_user(username: str, *orgs: Organization, password: str | None = None) -> User:
    """A member of ``orgs``. Without a password the user cannot sign in with the form (tests use
    ``force_login``), which spares the deliberately slow password hashing."""
    user = User.objects.create_user(username=username, password=password)
    for org in orgs:
        org.members.add(user)
    return user


def make_cast(*, alice_password: str | None = None) -> Cast:
    acme, globex = make_org("acme"), make_org("globex")
    return Cast(
        alice=make_user("alice", acme, password=alice_password),
        bob=make_user("bob", acme),
        charlie=make_user("charlie", globex),
        acme=acme,
        globex=globex,
    )


def make_definition(
    suite: str,
    case: str,
    *,
    prompt: str = "Add a /health route that returns 200",
    checks: list[dict] | None = None,
) -> dict:
    definition = {
        "suite": suite,
        "case": case,
        "prompt": prompt,
        "system_prompt": None,
        "source": {"kind": "empty"},
        "prepare": None,
        "cache": None,
        "limits": {"max_turns": 8, "timeout_ms": 900000},
        "conversation": {"user": None, "expected_output": None, "plan_mode": False},
        "checks": [
            {
                "kind": "command",
                "name": "pytest -q",
                "command": "pytest -q --maxfail=1",
                "timeout_ms": 600000,
            },
            {
                "kind": "validator",
                "name": "has_health_route",
                "qualname": "has_health_route",
                "path": EVAL_PATH,
                "start": 5,
                "end": 8,
                "sha256": "0" * 64,
            },
        ],
    }
    if checks is not None:
        definition["checks"] = checks
    return definition


def assertion_spec(
    type: str, value: object = None, *, name: str, weight: float = 1.0, metric: str | None = None
) -> dict:
    """A weighted assertion as the catalog writes it into a version's definition."""
    return {
        "kind": "assertion",
        "name": name,
        "type": type,
        "weight": weight,
        "metric": metric,
        "value": value,
    }


def _hash(definition: dict) -> str:
    return hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()


def make_suite(org: Organization, slug: str = "api") -> Suite:
    suite, _ = Suite.objects.get_or_create(
        organization=org, slug=slug, defaults={"name": f"{slug.title()} suite"}
    )
    return suite


def make_case(
    org: Organization, slug: str, *, suite: str = "api", tags: Sequence[str] = ()
) -> Case:
    return Case.objects.create(
        organization=org,
        suite=make_suite(org, suite),
        slug=slug,
        name=slug.replace("-", " ").capitalize(),
        tags=list(tags),
    )


def make_version(
    case: Case,
    *,
    definition: dict | None = None,
    sources: dict | None = None,
    number: int | None = None,
) -> CaseVersion:
    definition = definition or make_definition(case.suite.slug, case.slug)
    number = number or (case.versions.count() + 1)
    return CaseVersion.objects.create(
        case=case,
        number=number,
        definition=definition,
        definition_hash=_hash(definition),
        sources={EVAL_PATH: EVAL_SOURCE} if sources is None else sources,
        module_path=f"/srv/evals/{EVAL_PATH}",
    )


def make_variant(org: Organization, name: str, *, model: str = "") -> Variant:
    spec = {"harness": "command", "name": name, "model": model}
    return Variant.objects.create(
        organization=org,
        name=name,
        harness="command",
        model=model or f"scripted/{name}",
        spec=spec,
        spec_hash=_hash({**spec, "org": org.slug}),
    )


def make_batch(org: Organization, **fields) -> Batch:
    return Batch.objects.create(organization=org, **fields)


def make_run(batch: Batch, version: CaseVersion, variant: Variant) -> Run:
    return Run.objects.create(batch=batch, case_version=version, variant=variant)


def make_trial(run: Run, index: int = 0, status: str = Trial.Status.PASSED, **fields) -> Trial:
    now = timezone.now()
    defaults: dict = {"input_tokens": 1200, "output_tokens": 300}
    if status in Trial.FINAL_STATUSES:
        defaults.update(started_at=now - timedelta(seconds=40), finished_at=now, duration_ms=40_000)
    return Trial.objects.create(run=run, index=index, status=status, **{**defaults, **fields})


def make_checks(
    trial: Trial,
    *,
    command_passed: bool = True,
    validator_passed: bool = True,
    validator_message: str = "",
) -> list[Check]:
    return [
        Check.objects.create(
            trial=trial,
            index=0,
            name="pytest -q",
            kind="command",
            passed=command_passed,
            message="" if command_passed else "exit code 1",
            output="1 failed, 3 passed",
        ),
        Check.objects.create(
            trial=trial,
            index=1,
            name="has_health_route",
            kind="validator",
            passed=validator_passed,
            message=validator_message,
            source_ref={"path": EVAL_PATH, "start": 5, "end": 8, "qualname": "has_health_route"},
        ),
    ]


StatusChooser = Callable[[int, int, int], str]


def all_passed(case_index: int, variant_index: int, trial_index: int) -> str:
    return Trial.Status.PASSED


def make_batch_with_grid(
    org: Organization,
    *,
    cases: int = 3,
    variants: int = 2,
    trials: int = 3,
    status: StatusChooser = all_passed,
    suites: Iterable[str] = ("api",),
    tags: Callable[[int], list[str]] = lambda i: [],
    **batch_fields,
) -> Batch:
    """A batch with ``cases`` x ``variants`` runs of ``trials`` trials each, bulk-created.

    ``status(case, variant, trial)`` picks each trial's status; cases are spread over ``suites``
    in turn and named ``case-000``, ``case-001``...
    """
    batch = make_batch(org, **batch_fields)
    suite_cycle = itertools.cycle([make_suite(org, slug) for slug in suites])
    # A case keeps its handle and its version 1 across batches, as it does when an unchanged
    # eval file runs again.
    slugs = [f"case-{i:03d}" for i in range(cases)]
    existing = {c.slug: c for c in Case.objects.filter(organization=org, slug__in=slugs)}
    Case.objects.bulk_create(
        [
            Case(
                organization=org, suite=next(suite_cycle), slug=slug, name=f"Case {i}", tags=tags(i)
            )
            for i, slug in enumerate(slugs)
            if slug not in existing
        ]
    )
    made_cases = sorted(
        Case.objects.filter(organization=org, slug__in=slugs).select_related("suite"),
        key=lambda c: c.slug,
    )
    known = {v.case_id: v for v in CaseVersion.objects.filter(case__in=made_cases, number=1)}
    CaseVersion.objects.bulk_create(
        [
            CaseVersion(
                case=case,
                number=1,
                definition=(d := make_definition(case.suite.slug, case.slug)),
                definition_hash=_hash(d),
                sources={EVAL_PATH: EVAL_SOURCE},
                module_path="/srv/x.eval.py",
            )
            for case in made_cases
            if case.pk not in known
        ]
    )
    by_case = {v.case_id: v for v in CaseVersion.objects.filter(case__in=made_cases, number=1)}
    versions = [by_case[case.pk] for case in made_cases]
    made_variants = [make_variant(org, f"variant-{batch.pk}-{j}") for j in range(variants)]
    runs = Run.objects.bulk_create(
        [
            Run(batch=batch, case_version=version, variant=variant)
            for version in versions
            for variant in made_variants
        ]
    )
    now = timezone.now()
    rows = []
    for n, run in enumerate(runs):
        case_index, variant_index = divmod(n, variants)
        for t in range(trials):
            chosen = status(case_index, variant_index, t)
            final = chosen in Trial.FINAL_STATUSES
            rows.append(
                Trial(
                    run=run,
                    index=t,
                    status=chosen,
                    input_tokens=1000 + t,
                    output_tokens=200,
                    started_at=now - timedelta(seconds=30)
                    if chosen != Trial.Status.QUEUED
                    else None,
                    finished_at=now if final else None,
                    duration_ms=30_000 if final else None,
                )
            )
    Trial.objects.bulk_create(rows)
    return batch


def make_trial_with_events(
    run: Run,
    *,
    index: int = 0,
    status: str = Trial.Status.PASSED,
    artifacts_dir: Path | None = None,
) -> Trial:
    """A two-turn trial: an authored prompt, then a responder's reply in plan mode, with one
    event of every kind."""
    trial = make_trial(
        run,
        index,
        status,
        artifacts_dir=str(artifacts_dir or ""),
        conversation_outcome="completed",
        finish_reason="end_turn",
        session_id="sess-42",
    )
    Turn.objects.create(
        trial=trial,
        index=0,
        prompt="Add a /health route that returns 200",
        input_tokens=900,
        output_tokens=200,
    )
    Turn.objects.create(
        trial=trial,
        index=1,
        prompt="Yes, go ahead with the plan.",
        origin={"responder": {"reason": "the agent asked for approval"}},
        mode="plan",
        input_tokens=300,
        output_tokens=100,
    )
    at = timezone.now()
    events = [
        (0, "Started", {"session_id": "sess-42", "model": "scripted/careful"}),
        (
            0,
            "Message",
            {"role": "assistant", "text": "I'll add the route and a test.", "usage": None},
        ),
        (
            0,
            "Command",
            {
                "command": "pytest -q",
                "exit_code": 1,
                "output": "F\n1 failed in 0.1s\n",
                "origin": "agent",
            },
        ),
        (
            0,
            "ToolCall",
            {
                "call_id": "call-1",
                "name": "write_file",
                "input": '{"path": "app.py"}',
                "output": "wrote 12 lines",
                "error": None,
                "status": "completed",
            },
        ),
        (0, "FileChange", {"paths": ["app.py", "tests/test_health.py"]}),
        (
            0,
            "Usage",
            {
                "input_tokens": 900,
                "output_tokens": 200,
                "cache_read_tokens": 0,
                "cache_write_tokens": 0,
                "total_tokens": 1100,
            },
        ),
        (1, "Message", {"role": "assistant", "text": "Done: /health returns 200.", "usage": None}),
        (1, "Finished", {"reason": "end_turn"}),
    ]
    Event.objects.bulk_create(
        [
            Event(
                trial=trial,
                turn_index=turn,
                seq=seq,
                kind=kind,
                at=at + timedelta(seconds=seq),
                data=data,
            )
            for seq, (turn, kind, data) in enumerate(events)
        ]
    )
    return trial


def add_events(
    trial: Trial, count: int, *, start_seq: int = 0, turn_index: int = 0, text: str = "step"
) -> None:
    at = timezone.now()
    Event.objects.bulk_create(
        [
            Event(
                trial=trial,
                turn_index=turn_index,
                seq=seq,
                kind="Message",
                at=at,
                data={"role": "assistant", "text": f"{text} {seq}", "usage": None},
            )
            for seq in range(start_seq, start_seq + count)
        ]
    )


def make_assertion_check(
    trial: Trial,
    index: int,
    *,
    name: str,
    metric: str = "",
    weight: float = 1.0,
    passed: bool = True,
    score: float | None = None,
    message: str = "",
) -> Check:
    """One graded assertion; its score is 1 or 0 by ``passed`` unless given."""
    return Check.objects.create(
        trial=trial,
        index=index,
        name=name,
        kind="assertion",
        passed=passed,
        score=float(passed) if score is None else score,
        weight=weight,
        metric=metric,
        message=message,
    )


def make_consultation(trial: Trial, kind: str, **fields) -> Consultation:
    defaults: dict = {"model": "small-model", "duration_ms": 800}
    return Consultation.objects.create(trial=trial, kind=kind, **{**defaults, **fields})


PERSONA = "You are Dana, a busy clinic manager who wants a demo next Tuesday."


def make_simulated_conversation(
    run: Run, *, index: int = 0, artifacts_dir: Path | None = None, **trial_fields
) -> Trial:
    """A simulated user's conversation: the persona's first message (authored), the agent's
    answer, then the simulated user's reply written after consulting the model about round 0,
    and the agent's last answer."""
    trial = make_trial(
        run,
        index,
        artifacts_dir=str(artifacts_dir or ""),
        conversation_outcome="completed",
        **trial_fields,
    )
    Turn.objects.create(trial=trial, index=0, prompt="Hi, I'd like to see a demo.")
    Turn.objects.create(
        trial=trial,
        index=1,
        prompt="Tuesday at 10 works for me.",
        origin={"simulated_user": {"model": "persona-model"}},
    )
    make_consultation(
        trial,
        Consultation.Kind.SIMULATED_USER,
        turn_index=0,
        model="persona-model",
        prompt=[
            {"role": "system", "content": PERSONA},
            {"role": "assistant", "content": "Hi, I'd like to see a demo."},
            {"role": "user", "content": "Happy to help! Does Tuesday at 10 suit you?"},
        ],
        answer="Tuesday at 10 works for me.",
        verdict="reply",
    )
    at = timezone.now()
    Event.objects.bulk_create(
        [
            Event(
                trial=trial,
                turn_index=turn,
                seq=seq,
                kind="Message",
                at=at + timedelta(seconds=seq),
                data={"role": "assistant", "text": text, "usage": None},
            )
            for seq, (turn, text) in enumerate(
                [
                    (0, "Happy to help! Does Tuesday at 10 suit you?"),
                    (1, "Booked: Tuesday at 10. ###STOP###"),
                ]
            )
        ]
    )
    return trial
