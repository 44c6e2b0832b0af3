"""The one place that scopes what a user may see: their organizations' objects, nothing else.

Every view, API endpoint and websocket consumer fetches through these helpers, so an object of
another organization answers 404 everywhere without a per-view check.
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from evals_app.models import Batch, Case, CaseVersion, Organization, Run, Suite, Trial, Variant


def organizations_of(user) -> QuerySet[Organization]:
    if not user.is_authenticated:
        return Organization.objects.none()
    return Organization.objects.filter(members=user)


def suites_for(user) -> QuerySet[Suite]:
    return Suite.objects.filter(organization__in=organizations_of(user))


def cases_for(user) -> QuerySet[Case]:
    return Case.objects.filter(organization__in=organizations_of(user))


def case_versions_for(user) -> QuerySet[CaseVersion]:
    return CaseVersion.objects.filter(case__organization__in=organizations_of(user))


def variants_for(user) -> QuerySet[Variant]:
    return Variant.objects.filter(organization__in=organizations_of(user))


def batches_for(user) -> QuerySet[Batch]:
    return Batch.objects.filter(organization__in=organizations_of(user))


def runs_for(user) -> QuerySet[Run]:
    return Run.objects.filter(batch__organization__in=organizations_of(user))


def trials_for(user) -> QuerySet[Trial]:
    return Trial.objects.filter(run__batch__organization__in=organizations_of(user))


def get_or_404(queryset: QuerySet, **lookup):
    """The one object matching ``lookup`` inside an already scoped queryset, else 404."""
    try:
        return queryset.get(**lookup)
    except (queryset.model.DoesNotExist, ValueError, TypeError):
        raise Http404 from None
