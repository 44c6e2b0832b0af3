"""The catalog: turns loaded definitions into database rows, making a new CaseVersion exactly
when a case's resolved definition changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Max

from evals_app.models import Case, CaseVersion, Organization, Suite, Variant
from evals_app.resolution import ResolvedCase, canonical_hash, variant_spec
from proctor.definitions import Suite as SuiteDefinition
from proctor.definitions import Variant as VariantDefinition
from proctor.validation import Problem


@dataclass
class RecordedCase:
    resolved: ResolvedCase
    version: CaseVersion
    created: bool


def ownership_problems(
    organization: Organization, resolved: Sequence[ResolvedCase], file_of
) -> list[Problem]:
    """Case ids that already belong to another suite of the organization (ids are unique
    within an organization, and a case's history must not silently change suites)."""
    slugs = {r.case.id: r for r in resolved}
    problems = []
    for case_slug, suite_slug in Case.objects.filter(
        organization=organization, slug__in=slugs
    ).values_list("slug", "suite__slug"):
        r = slugs[case_slug]
        if suite_slug != r.suite.id:
            problems.append(
                Problem(
                    file=file_of(r),
                    suite=r.suite.id,
                    case=case_slug,
                    message=f"id already belongs to suite {suite_slug} in this organization; case ids are unique within an organization",
                )
            )
    return problems


def record_cases(
    organization: Organization, resolved: Sequence[ResolvedCase]
) -> list[RecordedCase]:
    """Suites, cases and (when new) case versions for ``resolved``, in one transaction."""
    recorded = []
    with transaction.atomic():
        suites: dict[str, Suite] = {}
        for item in resolved:
            definition: SuiteDefinition = item.suite
            if definition.id not in suites:
                suite, _ = Suite.objects.get_or_create(
                    organization=organization,
                    slug=definition.id,
                    defaults={"name": definition.label},
                )
                if suite.name != definition.label:
                    suite.name = definition.label
                    suite.save(update_fields=["name"])
                suites[definition.id] = suite
            recorded.append(_record_case(organization, suites[definition.id], item))
    return recorded


def _record_case(organization: Organization, suite: Suite, item: ResolvedCase) -> RecordedCase:
    case, _ = Case.objects.select_for_update().get_or_create(
        organization=organization,
        slug=item.case.id,
        defaults={"suite": suite, "name": item.case.label, "tags": list(item.case.tags)},
    )
    if case.name != item.case.label or case.tags != list(item.case.tags):
        # Name and tags label the case; they are not part of its definition.
        case.name, case.tags = item.case.label, list(item.case.tags)
        case.save(update_fields=["name", "tags"])
    existing = case.versions.filter(definition_hash=item.definition_hash).first()
    if existing is not None:
        if existing.module_path != str(item.module_path):
            CaseVersion.objects.filter(pk=existing.pk).update(module_path=str(item.module_path))
            existing.module_path = str(item.module_path)
        return RecordedCase(item, existing, created=False)
    number = (case.versions.aggregate(n=Max("number"))["n"] or 0) + 1
    version = CaseVersion.objects.create(
        case=case,
        number=number,
        definition=item.definition,
        definition_hash=item.definition_hash,
        sources=item.sources,
        module_path=str(item.module_path),
    )
    return RecordedCase(item, version, created=True)


def record_variant(organization: Organization, variant: VariantDefinition) -> Variant:
    spec = variant_spec(variant)
    row, _ = Variant.objects.get_or_create(
        organization=organization,
        spec_hash=canonical_hash(spec),
        defaults={
            "name": variant.name,
            "harness": variant.harness,
            "model": variant.model or "",
            "sandbox": variant.sandbox,
            "spec": spec,
        },
    )
    return row
