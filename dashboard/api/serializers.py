"""The API's JSON shapes: read-only views of the domain, and the bodies a rerun accepts.

Counts (``trial_counts``, ``case_count``) are annotations the views add to their querysets, or
a run's own counts of its trials, so a list serializes without a query per row.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from evals_app.models import (
    Batch,
    Case,
    CaseVersion,
    Check,
    Consultation,
    Event,
    Run,
    Suite,
    Trial,
    Turn,
    Variant,
)
from evals_app.version_diff import describe_changes
from runner.sandboxes.workspace_paths import shown_path

TRIAL_STATUSES = tuple(Trial.Status.values)


def trial_count_name(status: str) -> str:
    """The annotation that holds the number of trials in ``status`` (see the views)."""
    return f"trials_{status}"


class TrialCountsSerializer(serializers.Serializer):
    """How many trials are in each status, and in all."""

    total = serializers.IntegerField()
    queued = serializers.IntegerField()
    running = serializers.IntegerField()
    passed = serializers.IntegerField()
    failed = serializers.IntegerField()
    timed_out = serializers.IntegerField()
    errored = serializers.IntegerField()
    budget_exhausted = serializers.IntegerField(
        help_text="Ended by the batch's budget: neither failed nor errored."
    )


class TrialCountsMixin(serializers.Serializer):
    trial_counts = serializers.SerializerMethodField()

    @extend_schema_field(TrialCountsSerializer)
    def get_trial_counts(self, obj) -> dict[str, int]:
        counts = {status: getattr(obj, trial_count_name(status)) for status in TRIAL_STATUSES}
        return {"total": sum(counts.values()), **counts}


class SuiteSerializer(serializers.ModelSerializer):
    organization = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    case_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Suite
        fields = ["id", "organization", "slug", "name", "case_count", "created_at"]


class CaseVersionSummarySerializer(serializers.ModelSerializer):
    class Meta:
        model = CaseVersion
        fields = ["id", "number", "definition_hash", "created_at"]


class CaseSerializer(serializers.ModelSerializer):
    organization = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    suite = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    versions = CaseVersionSummarySerializer(many=True, read_only=True)

    class Meta:
        model = Case
        fields = ["id", "organization", "suite", "slug", "name", "tags", "versions", "created_at"]


class CaseVersionSerializer(serializers.ModelSerializer):
    """A version as listed: its definition without the captured source text."""

    case = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    case_id = serializers.IntegerField(read_only=True)

    class Meta:
        model = CaseVersion
        fields = ["id", "case_id", "case", "number", "definition", "definition_hash", "created_at"]


class CaseVersionDetailSerializer(CaseVersionSerializer):
    """One version in full: captured sources and what changed since the previous version.

    ``changes`` costs one query for the previous version.
    """

    changes = serializers.SerializerMethodField()

    class Meta(CaseVersionSerializer.Meta):
        fields = [*CaseVersionSerializer.Meta.fields, "changes", "sources", "module_path"]

    def get_changes(self, obj: CaseVersion) -> list[str]:
        previous = (
            CaseVersion.objects.filter(case_id=obj.case_id, number__lt=obj.number)
            .order_by("-number")
            .only("definition")
            .first()
        )
        return describe_changes(previous.definition if previous else None, obj.definition)


class VariantSerializer(serializers.ModelSerializer):
    organization = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Variant
        fields = [
            "id",
            "organization",
            "name",
            "harness",
            "model",
            "sandbox",
            "spec",
            "spec_hash",
            "created_at",
        ]


class VariantSummarySerializer(serializers.ModelSerializer):
    class Meta:
        model = Variant
        fields = ["id", "name", "harness", "model"]


class BatchSerializer(TrialCountsMixin, serializers.ModelSerializer):
    organization = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    created_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    run_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Batch
        fields = [
            "id",
            "organization",
            "status",
            "label",
            "parent",
            "created_by",
            "created_at",
            "finished_at",
            "options",
            "run_count",
            "trial_counts",
        ]


class RunCaseVersionSerializer(serializers.ModelSerializer):
    case_id = serializers.IntegerField(read_only=True)
    case = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = CaseVersion
        fields = ["id", "number", "case_id", "case"]


class RunSerializer(TrialCountsMixin, serializers.ModelSerializer):
    case_version = RunCaseVersionSerializer(read_only=True)
    variant = VariantSummarySerializer(read_only=True)
    pass_rate = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = ["id", "batch", "case_version", "variant", "spec", "trial_counts", "pass_rate"]

    def get_pass_rate(self, obj: Run) -> float | None:
        """Passed over finished trials; null while none has finished."""
        finished = sum(getattr(obj, trial_count_name(status)) for status in Trial.FINAL_STATUSES)
        return getattr(obj, trial_count_name(Trial.Status.PASSED)) / finished if finished else None


class CheckSerializer(serializers.ModelSerializer):
    class Meta:
        model = Check
        fields = [
            "index",
            "name",
            "kind",
            "passed",
            "score",
            "message",
            "output",
            "source_ref",
            "duration_ms",
        ]


class TurnSerializer(serializers.ModelSerializer):
    class Meta:
        model = Turn
        fields = [
            "index",
            "prompt",
            "origin",
            "mode",
            "answer",
            "input_tokens",
            "output_tokens",
            "started_at",
            "finished_at",
        ]


class ConsultationSerializer(serializers.ModelSerializer):
    """A responder, judge or simulated-user call: the prompt it was shown and its verdict."""

    class Meta:
        model = Consultation
        fields = [
            "kind",
            "turn_index",
            "check_index",
            "model",
            "prompt",
            "answer",
            "verdict",
            "reason",
            "cause",
            "duration_ms",
            "created_at",
        ]


class TrialSerializer(serializers.ModelSerializer):
    batch = serializers.IntegerField(source="run.batch_id", read_only=True)
    total_tokens = serializers.IntegerField(read_only=True)
    checks = CheckSerializer(many=True, read_only=True)

    class Meta:
        model = Trial
        fields = [
            "id",
            "run",
            "batch",
            "index",
            "status",
            "finish_reason",
            "error",
            "conversation_outcome",
            "stop_cause",
            "responder_cause",
            "plan_state",
            "plan_signal",
            "score",
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "total_tokens",
            "queued_at",
            "started_at",
            "finished_at",
            "duration_ms",
            "checks",
        ]


class TrialDetailSerializer(TrialSerializer):
    """One trial with its answer, session, turns and consultations; events are paged
    separately."""

    turns = TurnSerializer(many=True, read_only=True)
    consultations = ConsultationSerializer(many=True, read_only=True)

    class Meta(TrialSerializer.Meta):
        fields = [*TrialSerializer.Meta.fields, "answer", "session_id", "turns", "consultations"]


class EventSerializer(serializers.ModelSerializer):
    class Meta:
        model = Event
        fields = ["seq", "turn_index", "kind", "at", "data"]

    def to_representation(self, instance: Event) -> dict[str, Any]:
        """A FileChange's paths relative to the workspace, as the trial page shows them, also
        for a trial recorded when the sandbox's absolute paths were stored."""
        shown = super().to_representation(instance)
        data = shown.get("data")
        if instance.kind == Event.Kind.FILE_CHANGE and isinstance(data, dict):
            paths = data.get("paths")
            if isinstance(paths, list):
                shown["data"] = {
                    **data,
                    "paths": [shown_path(p) if isinstance(p, str) else p for p in paths],
                }
        return shown


class RerunBatchRequestSerializer(serializers.Serializer):
    scope = serializers.ChoiceField(
        choices=[
            ("all", "every run again"),
            ("failed", "only failed, errored and timed-out trials"),
            ("errored", "only errored trials (broken infrastructure, not agent results)"),
        ],
        default="all",
    )


class RerunCaseRequestSerializer(serializers.Serializer):
    case = serializers.CharField(
        max_length=100, help_text="The slug of a case that ran in this batch."
    )
