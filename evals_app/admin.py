"""The Django admin for staff: organizations and their members, what was defined, what ran.

A case's history shows read-only inline on the case: each version's number, date, what changed
since the version before, and the validator source it captured. Versions and results are
records, so the admin shows them without offering to change them.

Staff who are not superusers (``proctor createuser --staff``) see their organizations' records
and nothing else: every list, filter, search and change page goes through a queryset scoped to
the organizations they are members of, and they may view those records without being granted
Django permissions one by one. Adding, changing and deleting still need Django's permissions.
Superusers see everything.
"""

from __future__ import annotations

import json

from django.contrib import admin
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from evals_app.models import (
    Batch,
    Case,
    CaseVersion,
    Check,
    Consultation,
    Organization,
    Run,
    Suite,
    Trial,
    Variant,
)
from evals_app.version_diff import describe_changes, unified_source_diff

# Long source lines wrap inside the admin's column instead of widening the whole page.
WRAPPED_PRE = "white-space: pre-wrap; overflow-wrap: anywhere"


def _previous_version(version: CaseVersion) -> CaseVersion | None:
    """The version just before this one (one query)."""
    return (
        CaseVersion.objects.filter(case_id=version.case_id, number__lt=version.number)
        .order_by("-number")
        .first()
    )


def _captured_callables(definition: dict) -> list[tuple[str, dict]]:
    """(label, reference) for each piece of Python the version captured: prepare, validators."""
    callables = []
    if definition.get("prepare"):
        callables.append(("prepare", definition["prepare"]))
    for check in definition.get("checks") or []:
        if check.get("kind") == "validator":
            callables.append((f"check {check.get('name')}", check))
    return callables


def _source_lines(sources: dict, reference: dict) -> str | None:
    """The captured lines ``start``..``end`` (1-based, inclusive) of a callable, or None
    when its file was not captured."""
    text = sources.get(reference.get("path", ""))
    if text is None:
        return None
    lines = text.splitlines()
    start, end = reference.get("start") or 1, reference.get("end") or len(lines)
    return "\n".join(lines[start - 1 : end])


def render_changes(version: CaseVersion) -> SafeString:
    previous = _previous_version(version)
    changes = describe_changes(previous.definition if previous else None, version.definition)
    if not changes:
        return format_html("<em>{}</em>", "no change in the definition")
    # Line breaks, not a list: the admin wraps read-only values in a <p>.
    return format_html_join(mark_safe("<br>"), "{}", ((change,) for change in changes))


def render_validator_source(version: CaseVersion) -> SafeString:
    blocks = []
    for label, reference in _captured_callables(version.definition):
        where = f"{reference.get('path')}:{reference.get('start')}-{reference.get('end')}"
        text = _source_lines(version.sources or {}, reference)
        if text is None:
            blocks.append(
                format_html("<strong>{}</strong> ({}): source not captured<br>", label, where)
            )
        else:
            blocks.append(
                format_html(
                    '<strong>{}</strong> ({})<pre style="{}">{}</pre>',
                    label,
                    where,
                    WRAPPED_PRE,
                    text,
                )
            )
    if not blocks:
        return format_html("<em>{}</em>", "no Python validators")
    return format_html_join("", "{}", ((block,) for block in blocks))


admin.site.site_header = "Proctor administration"
admin.site.site_title = "Proctor admin"
admin.site.index_title = "Records"


def _member_staff(request: HttpRequest) -> bool:
    """A staff user who is not a superuser: sees what their organizations own."""
    user = request.user
    return bool(user.is_active and user.is_staff and not user.is_superuser)


def _their_organizations(request: HttpRequest) -> QuerySet[Organization]:
    return Organization.objects.filter(members__pk=request.user.pk or 0)


class OrganizationScopedAdmin(admin.ModelAdmin):
    """A model admin whose rows a staff member sees only for their own organizations.

    ``organization_path`` is the lookup from the model to its organization (``""`` for the
    organization itself). Filters on related rows list only the values in the scoped rows, so
    another organization's names never appear in a sidebar either.
    """

    organization_path = "organization"

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        lookup = f"{self.organization_path}__in" if self.organization_path else "pk__in"
        return queryset.filter(**{lookup: _their_organizations(request)})

    def has_module_permission(self, request: HttpRequest) -> bool:
        return super().has_module_permission(request) or _member_staff(request)

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        # The object, when given, came through get_queryset, so it is theirs already.
        return super().has_view_permission(request, obj) or _member_staff(request)

    def formfield_for_foreignkey(self, db_field, request: HttpRequest, **kwargs):
        if db_field.related_model is Organization and not request.user.is_superuser:
            kwargs["queryset"] = _their_organizations(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


def _related_only(*paths: str) -> list:
    """List filters that offer only the values present in the (scoped) rows."""
    return [(path, admin.RelatedOnlyFieldListFilter) for path in paths]


class ReadOnlyInline(admin.TabularInline):
    """Rows shown for reading: no add, change or delete from the parent's page."""

    extra = 0
    can_delete = False

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        # The parent page is scoped to the user's organizations, and so are its rows.
        return super().has_view_permission(request, obj) or _member_staff(request)

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(Organization)
class OrganizationAdmin(OrganizationScopedAdmin):
    organization_path = ""
    list_display = ["name", "slug", "member_count", "created_at"]
    search_fields = ["name", "slug", "members__username"]
    prepopulated_fields = {"slug": ["name"]}
    filter_horizontal = ["members"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(member_count=Count("members", distinct=True))

    @admin.display(description="members", ordering="member_count")
    def member_count(self, obj: Organization) -> int:
        return obj.member_count  # type: ignore[attr-defined]  # annotated by get_queryset


@admin.register(Suite)
class SuiteAdmin(OrganizationScopedAdmin):
    list_display = ["slug", "name", "organization", "created_at"]
    list_filter = _related_only("organization")
    list_select_related = ["organization"]
    search_fields = ["slug", "name"]


class CaseVersionInline(ReadOnlyInline):
    model = CaseVersion
    readonly_fields = (
        "number",
        "created_at",
        "changes",
        "validator_source",
    )
    fields = readonly_fields
    ordering = ["-number"]
    show_change_link = True

    @admin.display(description="what changed")
    def changes(self, version: CaseVersion) -> SafeString:
        return render_changes(version)

    @admin.display(description="validator source")
    def validator_source(self, version: CaseVersion) -> SafeString:
        return render_validator_source(version)


@admin.register(Case)
class CaseAdmin(OrganizationScopedAdmin):
    list_display = [
        "slug",
        "name",
        "suite",
        "organization",
        "tag_list",
        "version_count",
        "created_at",
    ]
    list_filter = _related_only("organization", "suite")
    list_select_related = ["organization", "suite"]
    search_fields = ["slug", "name", "suite__slug"]
    inlines = [CaseVersionInline]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(version_count=Count("versions"))

    @admin.display(description="tags")
    def tag_list(self, case: Case) -> str:
        return ", ".join(case.tags or [])

    @admin.display(description="versions", ordering="version_count")
    def version_count(self, case: Case) -> int:
        return case.version_count  # type: ignore[attr-defined]  # annotated by get_queryset


@admin.register(CaseVersion)
class CaseVersionAdmin(OrganizationScopedAdmin):
    """Versions are immutable: viewable, never added, changed or deleted here."""

    organization_path = "case__organization"
    list_display = ["__str__", "case", "number", "short_hash", "created_at"]
    list_filter = _related_only("case__organization", "case__suite")
    list_select_related = ["case"]
    search_fields = ["case__slug", "definition_hash"]
    readonly_fields = (
        "case",
        "number",
        "created_at",
        "definition_hash",
        "module_path",
        "changes",
        "validator_source",
        "pretty_definition",
        "source_diff",
    )
    fields = readonly_fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="hash")
    def short_hash(self, version: CaseVersion) -> str:
        return version.definition_hash[:12]

    @admin.display(description="what changed")
    def changes(self, version: CaseVersion) -> SafeString:
        return render_changes(version)

    @admin.display(description="validator source")
    def validator_source(self, version: CaseVersion) -> SafeString:
        return render_validator_source(version)

    @admin.display(description="definition")
    def pretty_definition(self, version: CaseVersion) -> SafeString:
        return format_html(
            '<pre style="{}">{}</pre>',
            WRAPPED_PRE,
            json.dumps(version.definition, indent=2, ensure_ascii=False),
        )

    @admin.display(description="source diff against the previous version")
    def source_diff(self, version: CaseVersion) -> SafeString:
        previous = _previous_version(version)
        diff = unified_source_diff(previous.sources if previous else {}, version.sources or {})
        return (
            format_html('<pre style="{}">{}</pre>', WRAPPED_PRE, diff)
            if diff
            else format_html("<em>{}</em>", "no source change")
        )


@admin.register(Variant)
class VariantAdmin(OrganizationScopedAdmin):
    list_display = ["name", "harness", "model", "sandbox", "organization", "created_at"]
    list_filter = [*_related_only("organization"), "harness", "sandbox"]
    list_select_related = ["organization"]
    search_fields = ["name", "model", "harness"]
    # The spec is what ran; its hash identifies the variant, so neither is edited by hand.
    readonly_fields = ["spec", "spec_hash"]


class RunInline(ReadOnlyInline):
    model = Run
    readonly_fields = (
        "case_version",
        "variant",
        "passed_of_total",
    )
    fields = readonly_fields
    show_change_link = True

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .select_related("case_version__case", "variant")
            .annotate(
                trial_total=Count("trials"),
                trial_passed=Count("trials", filter=Q(trials__status=Trial.Status.PASSED)),
            )
        )

    @admin.display(description="passed")
    def passed_of_total(self, run: Run) -> str:
        return f"{run.trial_passed}/{run.trial_total}"  # type: ignore[attr-defined]  # annotated


@admin.register(Batch)
class BatchAdmin(OrganizationScopedAdmin):
    list_display = [
        "__str__",
        "organization",
        "status",
        "label",
        "parent",
        "created_by",
        "created_at",
        "finished_at",
    ]
    list_filter = ["status", *_related_only("organization")]
    list_select_related = ["organization", "parent", "created_by"]
    search_fields = ["label", "created_by__username"]
    date_hierarchy = "created_at"
    readonly_fields = [
        "organization",
        "status",
        "parent",
        "options",
        "created_by",
        "created_at",
        "finished_at",
    ]
    inlines = [RunInline]


class TrialInline(ReadOnlyInline):
    model = Trial
    readonly_fields = (
        "index",
        "status",
        "duration_ms",
        "input_tokens",
        "output_tokens",
    )
    fields = readonly_fields
    show_change_link = True


@admin.register(Run)
class RunAdmin(OrganizationScopedAdmin):
    organization_path = "batch__organization"
    list_display = ["__str__", "batch", "case_version", "variant"]
    list_filter = _related_only("batch__organization", "variant")
    list_select_related = ["batch", "case_version__case", "variant"]
    search_fields = ["case_version__case__slug", "variant__name"]
    readonly_fields = ["batch", "case_version", "variant", "spec"]
    inlines = [TrialInline]


class CheckInline(ReadOnlyInline):
    model = Check
    readonly_fields = (
        "index",
        "name",
        "kind",
        "passed",
        "score",
        "message",
        "output",
        "duration_ms",
    )
    fields = readonly_fields


class ConsultationInline(ReadOnlyInline):
    model = Consultation
    readonly_fields = (
        "kind",
        "turn_index",
        "check_index",
        "model",
        "verdict",
        "reason",
        "cause",
        "duration_ms",
    )
    fields = readonly_fields
    show_change_link = False


@admin.register(Trial)
class TrialAdmin(OrganizationScopedAdmin):
    organization_path = "run__batch__organization"
    list_display = [
        "__str__",
        "case",
        "variant",
        "batch",
        "index",
        "status",
        "duration_ms",
        "total_tokens",
    ]
    list_filter = ["status", *_related_only("run__batch__organization", "run__variant")]
    list_select_related = ["run__batch", "run__case_version__case", "run__variant"]
    search_fields = [
        "run__case_version__case__slug",
        "run__variant__name",
        "finish_reason",
        "error",
    ]
    readonly_fields = [field.name for field in Trial._meta.concrete_fields if field.name != "id"]
    inlines = [CheckInline, ConsultationInline]

    @admin.display(description="case")
    def case(self, trial: Trial) -> str:
        return trial.run.case_version.case.slug

    @admin.display(description="variant")
    def variant(self, trial: Trial) -> str:
        return trial.run.variant.name

    @admin.display(description="batch")
    def batch(self, trial: Trial) -> str:
        return str(trial.run.batch)
