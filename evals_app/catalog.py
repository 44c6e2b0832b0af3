"""The catalog: turns a submission's cases and variants into database rows, making a new
CaseVersion exactly when a case's resolved definition changes.

It reads plain entries (``runner.batches.submission``), so a batch recorded by ``proctor eval``
on this machine and one sent to a server with ``--server`` go through the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Max

from evals_app.models import Case, CaseVersion, Organization, Suite, Variant
from proctor.rules import Problem


@dataclass
class RecordedCase:
    entry: dict[str, Any]
    version: CaseVersion
    created: bool


def ownership_problems(organization: Organization, entries: Sequence[dict[str, Any]]) -> list[str]:
    """Case ids that already belong to another suite of the organization (ids are unique
    within an organization, and a case's history must not silently change suites)."""
    by_slug = {e["case"]: e for e in entries}
    problems = []
    for case_slug, suite_slug in Case.objects.filter(
        organization=organization, slug__in=by_slug
    ).values_list("slug", "suite__slug"):
        entry = by_slug[case_slug]
        if suite_slug != entry["suite"]:
            problems.append(
                str(
                    Problem(
                        file=entry["module_path"],
                        suite=entry["suite"],
                        case=case_slug,
                        message=f"id already belongs to suite {suite_slug} in this organization; case ids are unique within an organization",
                    )
                )
            )
    return problems


def record_cases(
    organization: Organization, entries: Sequence[dict[str, Any]]
) -> list[RecordedCase]:
    """Suites, cases and (when new) case versions for ``entries``, in one transaction."""
    _share_source_texts(entries)
    recorded = []
    with transaction.atomic():
        suites: dict[str, Suite] = {}
        for entry in entries:
            slug = entry["suite"]
            if slug not in suites:
                suite, _ = Suite.objects.get_or_create(
                    organization=organization, slug=slug, defaults={"name": entry["suite_name"]}
                )
                if suite.name != entry["suite_name"]:
                    suite.name = entry["suite_name"]
                    suite.save(update_fields=["name"])
                suites[slug] = suite
            recorded.append(_record_case(organization, suites[slug], entry))
    return recorded


def _share_source_texts(entries: Sequence[dict[str, Any]]) -> None:
    """Make equal captured texts one string object, in place.

    Every case of a file captures the whole module, each read into its own string; a batch of
    a thousand cases of one file would otherwise hold a thousand copies for the whole run (the
    entries' dicts are the resolved cases' own)."""
    shared: dict[str, str] = {}
    for entry in entries:
        texts = entry.get("sources") or {}
        for path, text in texts.items():
            texts[path] = shared.setdefault(text, text)


def _record_case(organization: Organization, suite: Suite, entry: dict[str, Any]) -> RecordedCase:
    case, _ = Case.objects.select_for_update().get_or_create(
        organization=organization,
        slug=entry["case"],
        defaults={"suite": suite, "name": entry["name"], "tags": list(entry["tags"])},
    )
    if case.name != entry["name"] or case.tags != list(entry["tags"]):
        # Name and tags label the case; they are not part of its definition.
        case.name, case.tags = entry["name"], list(entry["tags"])
        case.save(update_fields=["name", "tags"])
    existing = case.versions.filter(definition_hash=entry["definition_hash"]).first()
    if existing is not None:
        if existing.module_path != entry["module_path"]:
            CaseVersion.objects.filter(pk=existing.pk).update(module_path=entry["module_path"])
            existing.module_path = entry["module_path"]
        return RecordedCase(entry, existing, created=False)
    number = (case.versions.aggregate(n=Max("number"))["n"] or 0) + 1
    version = CaseVersion.objects.create(
        case=case,
        number=number,
        definition=entry["definition"],
        definition_hash=entry["definition_hash"],
        sources=entry["sources"],
        module_path=entry["module_path"],
    )
    return RecordedCase(entry, version, created=True)


def record_variant(organization: Organization, entry: dict[str, Any]) -> Variant:
    row, _ = Variant.objects.get_or_create(
        organization=organization,
        spec_hash=entry["spec_hash"],
        defaults={
            "name": entry["name"],
            "harness": entry["harness"],
            "model": entry["model"],
            "sandbox": entry["sandbox"],
            "spec": entry["spec"],
            "profile_digest": entry.get("profile_bundle") or "",
        },
    )
    return row
