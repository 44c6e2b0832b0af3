"""Judges checked against people: trial labels, and how well each model judge agrees with them.

A signed-in member labels a trial passed or failed (``label_trial``). Per judge, that is per
rubric (the judge check's name) and per model that graded it: the judge's verdicts on labelled
trials against the labels, as a confusion matrix with Cohen's kappa and the true positive and
true negative rates (evals_app.estimators.Agreement). A judge whose kappa is below 0.6 on at
least 20 labels is *flagged*: its verdicts should not be taken on faith. A judge that could not
be consulted, or whose answer could not be read, gave no verdict and is left out.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from evals_app.estimators import Agreement
from evals_app.models import Batch, Check, Consultation, Organization, Trial, TrialLabel

# A judge is flagged below this kappa ("substantial" agreement starts at 0.6, Landis & Koch
# 1977) once it has at least this many labels.
KAPPA_FLOOR = 0.6
LABELS_NEEDED = 20

# The verdicts a judge consultation records (runner.grading.judges).
_JUDGE_VERDICTS = (TrialLabel.Verdict.PASSED, TrialLabel.Verdict.FAILED)


def label_trial(trial: Trial, user: Any, verdict: str, note: str = "") -> TrialLabel:
    """Record ``user``'s label of ``trial`` (replacing any earlier label of it). Raises
    ValueError for a verdict other than passed or failed."""
    if verdict not in TrialLabel.Verdict.values:
        raise ValueError(f"a label is passed or failed, not {verdict!r}")
    with transaction.atomic():
        label, _ = TrialLabel.objects.update_or_create(
            trial=trial,
            defaults={
                "organization_id": trial.run.batch.organization_id,
                "verdict": verdict,
                "note": note.strip(),
                "labelled_by": user,
                "labelled_at": timezone.now(),
            },
        )
    return label


@dataclass(frozen=True)
class JudgeAgreement:
    """One judge (rubric x model) against people's labels."""

    rubric: str
    model: str
    agreement: Agreement

    @property
    def flagged(self) -> bool:
        kappa = self.agreement.kappa
        return self.agreement.n >= LABELS_NEEDED and kappa is not None and kappa < KAPPA_FLOOR

    def to_dict(self) -> dict[str, Any]:
        a = self.agreement
        return {
            "rubric": self.rubric,
            "model": self.model,
            "n": a.n,
            "kappa": _r(a.kappa),
            "observed_agreement": _r(a.observed),
            "true_positive_rate": _r(a.true_positive_rate),
            "true_negative_rate": _r(a.true_negative_rate),
            "confusion": {
                "judge_passed_person_passed": a.both_pass,
                "judge_passed_person_failed": a.judge_only,
                "judge_failed_person_passed": a.person_only,
                "judge_failed_person_failed": a.both_fail,
            },
            "flagged": self.flagged,
        }


def judge_agreements(
    organization: Organization, *, batch_ids: Collection[int] | None = None
) -> list[JudgeAgreement]:
    """Each judge's agreement with the organization's labels (those of ``batch_ids`` only when
    given), by rubric then model. Three queries."""
    labels = TrialLabel.objects.filter(organization=organization)
    if batch_ids is not None:
        labels = labels.filter(trial__run__batch_id__in=batch_ids)
    people = dict(labels.values_list("trial_id", "verdict"))
    if not people:
        return []
    consulted = (
        Consultation.objects.filter(
            trial_id__in=people,
            kind=Consultation.Kind.JUDGE,
            verdict__in=_JUDGE_VERDICTS,
            check_index__isnull=False,
        )
        .order_by()
        .values_list("trial_id", "check_index", "model", "verdict")
    )
    names = {
        (trial_id, index): name
        for trial_id, index, name in Check.objects.filter(trial_id__in=people, kind="judge")
        .order_by()
        .values_list("trial_id", "index", "name")
    }
    cells: dict[tuple[str, str], list[int]] = {}
    for trial_id, index, model, verdict in consulted:
        rubric = names.get((trial_id, index or 0), f"judge #{index}")
        counts = cells.setdefault((rubric, model), [0, 0, 0, 0])
        judge_passed = verdict == TrialLabel.Verdict.PASSED
        person_passed = people[trial_id] == TrialLabel.Verdict.PASSED
        counts[(0 if judge_passed else 2) + (0 if person_passed else 1)] += 1
    return [
        JudgeAgreement(rubric, model, Agreement(both, judge_only, person_only, neither))
        for (rubric, model), (both, judge_only, person_only, neither) in sorted(cells.items())
    ]


def batch_judges(batch: Batch) -> set[tuple[str, str]]:
    """The (rubric, model) of every judge that gave a verdict in ``batch`` (two queries, a row
    per run and judge: the trials of a run share their checks)."""
    consulted = (
        Consultation.objects.filter(
            trial__run__batch=batch,
            kind=Consultation.Kind.JUDGE,
            verdict__in=_JUDGE_VERDICTS,
            check_index__isnull=False,
        )
        .order_by()
        .values_list("trial__run_id", "check_index", "model")
        .distinct()
    )
    names = {
        (run_id, index): name
        for run_id, index, name in Check.objects.filter(trial__run__batch=batch, kind="judge")
        .order_by()
        .values_list("trial__run_id", "index", "name")
        .distinct()
    }
    return {
        (names.get((run_id, index or 0), f"judge #{index}"), model)
        for run_id, index, model in consulted
    }


def flagged_judges(batch: Batch) -> list[JudgeAgreement]:
    """The judges of ``batch`` whose agreement with the organization's labels is flagged."""
    used = batch_judges(batch)
    if not used:
        return []
    return [
        j for j in judge_agreements(batch.organization) if j.flagged and (j.rubric, j.model) in used
    ]


def labelling_queue(
    batch: Batch, *, skipped: Collection[int] = ()
) -> tuple[Trial | None, int, int]:
    """The next finished, unlabelled trial of ``batch`` (by id, leaving out ``skipped``), and
    how many of its finished trials are labelled and in all. Three queries."""
    finished = Trial.objects.filter(run__batch=batch, status__in=Trial.FINAL_STATUSES)
    total = finished.count()
    labelled = finished.filter(human_label__isnull=False).count()
    upcoming = (
        finished.filter(human_label__isnull=True)
        .exclude(pk__in=list(skipped))
        .select_related("run__case_version__case__suite", "run__variant")
        .order_by("id")
        .first()
    )
    return upcoming, labelled, total


def exported_labels(
    organization: Organization, *, batch_ids: Collection[int] | None = None
) -> list[dict[str, Any]]:
    """The organization's labels as JSON (``proctor judges --json`` and the API)."""
    labels = TrialLabel.objects.filter(organization=organization)
    if batch_ids is not None:
        labels = labels.filter(trial__run__batch_id__in=batch_ids)
    rows = labels.order_by("labelled_at", "id").values(
        "trial_id",
        "trial__run__batch_id",
        "trial__run__case_version__case__suite__slug",
        "trial__run__case_version__case__slug",
        "trial__run__variant__name",
        "trial__status",
        "verdict",
        "note",
        "labelled_by__username",
        "labelled_at",
    )
    return [
        {
            "trial": row["trial_id"],
            "batch": row["trial__run__batch_id"],
            "suite": row["trial__run__case_version__case__suite__slug"],
            "case": row["trial__run__case_version__case__slug"],
            "variant": row["trial__run__variant__name"],
            "trial_status": row["trial__status"],
            "label": row["verdict"],
            "note": row["note"],
            "labelled_by": row["labelled_by__username"],
            "labelled_at": row["labelled_at"].isoformat(),
        }
        for row in rows
    ]


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
