"""Batches made with the ORM for the compare tests: one call per batch, naming each cell's
trial outcomes, so a test reads as the story it checks ("fix-add passed 3/3, then 0/3")."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from django.utils import timezone

from evals_app.models import Batch, Case, CaseVersion, Organization, Run, Suite, Trial, Variant

P, F, T, E = "passed", "failed", "timed_out", "errored"


def _hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


class Seed:
    """Builds batches of one organization; ``batch`` takes {(case, variant): [statuses]}."""

    def __init__(self, slug: str = "acme", suite: str = "calc") -> None:
        self.org = Organization.objects.create(slug=slug, name=slug.title())
        self.suite_slug = suite
        self._made = 0

    def suite(self, slug: str | None = None) -> Suite:
        suite, _ = Suite.objects.get_or_create(
            organization=self.org, slug=slug or self.suite_slug, defaults={"name": "Suite"}
        )
        return suite

    def version(self, case: str, number: int = 1, *, suite: str | None = None) -> CaseVersion:
        row, _ = Case.objects.get_or_create(
            organization=self.org,
            slug=case,
            defaults={"suite": self.suite(suite), "name": case.replace("-", " ").capitalize()},
        )
        found = CaseVersion.objects.filter(case=row, number=number).first()
        if found:
            return found
        definition = {"case": case, "version": number}
        return CaseVersion.objects.create(
            case=row,
            number=number,
            definition=definition,
            definition_hash=_hash(definition),
            module_path="/srv/evals/calc.eval.py",
        )

    def variant(
        self,
        name: str,
        *,
        digest: str = "d1",
        sandbox: str = "local",
        harness: str = "command",
        model: str = "",
        prices: Mapping[str, float] | None = None,
    ) -> Variant:
        spec: dict[str, Any] = {
            "name": name,
            "harness": harness,
            "model": model or f"scripted/{name}",
            "sandbox": sandbox,
            "profile": {"digest": digest},
            "options": {"prices": dict(prices)} if prices else {},
        }
        variant, _ = Variant.objects.get_or_create(
            organization=self.org,
            spec_hash=_hash(spec),
            defaults={
                "name": name,
                "harness": harness,
                "model": spec["model"],
                "sandbox": sandbox,
                "spec": spec,
                "profile_digest": digest,
            },
        )
        return variant

    def batch(
        self,
        cells: Mapping[tuple[str, str], Sequence[str]],
        *,
        label: str = "",
        versions: Mapping[str, int] | None = None,
        variants: Mapping[str, Mapping[str, Any]] | None = None,
        options: Mapping[str, Any] | None = None,
        parent: Batch | None = None,
        cost_usd: float | None = None,
        suite: str | None = None,
    ) -> Batch:
        """A finished batch whose cell (case, variant) ran the given trial statuses.
        ``versions`` picks a case's version number, ``variants`` a variant's attributes
        (digest, sandbox, harness, model, prices); each trial costs ``cost_usd``."""
        self._made += 1
        now = timezone.now() + timedelta(seconds=self._made)
        batch = Batch.objects.create(
            organization=self.org,
            label=label,
            status=Batch.Status.FINISHED,
            created_at=now,
            finished_at=now,
            options=dict(options or {}),
            parent=parent,
        )
        for (case, name), statuses in cells.items():
            run = Run.objects.create(
                batch=batch,
                case_version=self.version(case, (versions or {}).get(case, 1), suite=suite),
                variant=self.variant(name, **dict((variants or {}).get(name, {}))),
            )
            Trial.objects.bulk_create(
                Trial(
                    run=run,
                    index=i,
                    status=status,
                    input_tokens=1000,
                    output_tokens=200,
                    duration_ms=1500,
                    cost_usd=cost_usd,
                    started_at=now,
                    finished_at=now,
                )
                for i, status in enumerate(statuses)
            )
        return batch
