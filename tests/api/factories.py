"""Small explicit builders for the API and admin tests: rows made directly with the ORM."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

from django.contrib.auth.models import User
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
    Variant,
)

VALIDATOR_SOURCE = '''"""Acme's API evals."""


def has_health_route(workspace):
    """The app answers /health."""
    return "/health" in workspace.read("app.py")
'''


def make_org(slug: str) -> Organization:
    return Organization.objects.create(slug=slug, name=slug.title())


def make_user(username: str, org: Organization | None = None, **fields) -> User:
    user = User.objects.create_user(username=username, password="secret-password", **fields)
    if org is not None:
        org.members.add(user)
    return user


def make_definition(
    suite: str, case: str, *, prompt: str = "Add a /health route", timeout_ms: int = 900000
) -> dict:
    return {
        "suite": suite,
        "case": case,
        "prompt": prompt,
        "system_prompt": None,
        "source": {"kind": "empty"},
        "prepare": None,
        "cache": None,
        "limits": {"max_turns": 8, "timeout_ms": timeout_ms},
        "conversation": {"user": None, "expected_output": None, "plan_mode": False},
        "checks": [
            {"kind": "command", "name": "pytest -q", "command": "pytest -q", "timeout_ms": 600000},
            {
                "kind": "validator",
                "name": "has_health_route",
                "qualname": "has_health_route",
                "path": "evals/api.eval.py",
                "start": 4,
                "end": 6,
                "sha256": hashlib.sha256(VALIDATOR_SOURCE.encode()).hexdigest(),
            },
        ],
    }


def make_case(
    org: Organization,
    slug: str,
    *,
    suite_slug: str = "api",
    tags: list[str] | None = None,
    definitions: list[dict] | None = None,
) -> Case:
    """A case with one version per definition (default: one version)."""
    suite, _ = Suite.objects.get_or_create(
        organization=org, slug=suite_slug, defaults={"name": suite_slug.upper()}
    )
    case = Case.objects.create(
        organization=org, suite=suite, slug=slug, name=slug.replace("-", " "), tags=tags or []
    )
    for number, definition in enumerate(
        definitions or [make_definition(suite_slug, slug)], start=1
    ):
        CaseVersion.objects.create(
            case=case,
            number=number,
            definition=definition,
            definition_hash=hashlib.sha256(
                json.dumps(definition, sort_keys=True).encode()
            ).hexdigest(),
            sources={"evals/api.eval.py": VALIDATOR_SOURCE},
            module_path=f"/srv/{org.slug}/evals/api.eval.py",
        )
    return case


def make_variant(
    org: Organization, name: str, *, harness: str = "command", model: str = ""
) -> Variant:
    spec = {"name": name, "harness": harness, "model": model, "sandbox": "local"}
    return Variant.objects.create(
        organization=org,
        name=name,
        harness=harness,
        model=model,
        spec=spec,
        spec_hash=hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest(),
    )


def make_batch(
    org: Organization,
    cases: list[Case],
    variants: list[Variant],
    *,
    statuses: list[str] = ("passed", "failed", "errored"),
) -> Batch:
    """A finished batch: one run per case x variant, one trial per entry of ``statuses``, and
    per trial one check per definition check (all passing only on a passed trial)."""
    now = timezone.now()
    batch = Batch.objects.create(organization=org, status=Batch.Status.FINISHED, finished_at=now)
    for case in cases:
        version = case.latest_version()
        for variant in variants:
            run = Run.objects.create(
                batch=batch, case_version=version, variant=variant, spec=variant.spec
            )
            for index, status in enumerate(statuses):
                trial = Trial.objects.create(
                    run=run,
                    index=index,
                    status=status,
                    input_tokens=1000,
                    output_tokens=200,
                    started_at=now - timedelta(seconds=30),
                    finished_at=now,
                    duration_ms=30000,
                )
                for check_index, check in enumerate(version.definition["checks"]):
                    Check.objects.create(
                        trial=trial,
                        index=check_index,
                        name=check["name"],
                        kind=check["kind"],
                        passed=status == Trial.Status.PASSED,
                        message="" if status == Trial.Status.PASSED else "no /health route",
                    )
    return batch


def make_events(trial: Trial, count: int) -> list[Event]:
    now = timezone.now()
    return Event.objects.bulk_create(
        Event(
            trial=trial,
            seq=seq,
            turn_index=0,
            kind=Event.Kind.MESSAGE,
            at=now,
            data={"role": "assistant", "text": f"step {seq}", "usage": None},
        )
        for seq in range(count)
    )
