"""Re-grading a finished batch: the checks of the current eval file run on the batch's stored
workspaces and transcripts, with no agent run (``proctor regrade BATCH``, the batch page's
button).

The eval file is loaded from where the batch's eval was (each case version's ``module_path``)
or from the given paths, validated and recorded as for ``proctor eval``: its cases get their
own versions (a changed validator, a new one). The re-grade is a new batch, linked to the
original by its options (``regrade_of``) and named "re-graded from batch 7 with checks of v3";
it is not one of the original's reruns (``parent`` stays empty), so merged views never mix
re-graded results into the original. Each of its runs pairs a cell of the original, read with
its reruns (the latest trials, ``evals_app.merged``), with the case's current version and the
variant that ran; each of its trials names the stored trial it grades again
(``Run.spec["regrade_of"]``), and is queued like any trial, so the embedded pool or a
``proctor worker`` runs it (runner.jobs.regrading).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction

from evals_app.bundle_store import missing_bundles, save_bundle
from evals_app.catalog import record_cases
from evals_app.merged import batch_cells
from evals_app.models import Batch, Run, Trial
from runner.batches.creation import RunRequest, create_batch
from runner.batches.planning import InvalidInput, Selection, load_suites, plan_batch
from runner.batches.submission import build_submission
from runner.jobs import eval_code
from runner.jobs.regrading import regraded_trial_id
from runner.trial.spec import RunCode


def eval_paths_of(batch: Batch) -> list[str]:
    """Where the batch's eval files were: each case version's recorded path, once."""
    paths = (
        Run.objects.filter(batch=batch)
        .values_list("case_version__module_path", flat=True)
        .distinct()
        .order_by("case_version__module_path")
    )
    return list(paths)


def regrade_batch(
    batch: Batch, paths: Sequence[str] | None = None, *, user=None
) -> tuple[Batch, list[int], list[str]]:
    """Record the re-grade of ``batch`` with the checks of the eval files at ``paths`` (default:
    where its eval was): the new batch, its trial ids (enqueue them after the commit) and one
    line for each cell left out (its case is gone from the eval). Raises InvalidInput, having
    written nothing."""
    cells = batch_cells(batch, merged=True, mode="latest")
    finals = {key: [t for t in trials if t.is_final] for key, trials in cells.items()}
    finals = {key: trials for key, trials in finals.items() if trials}
    if not finals:
        raise InvalidInput([f"batch {batch.pk} has no finished trial to re-grade"])
    paths = list(paths or eval_paths_of(batch))
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise InvalidInput(
            [
                f"{p}: batch {batch.pk}'s eval file is not there (run from the folder `proctor "
                f"eval` ran in, or give its path: proctor regrade {batch.pk} PATH)"
                for p in missing
            ]
        )
    loaded = load_suites(paths)
    known = {(s.id, c.id) for _, s in loaded for c in s.cases}
    wanted = sorted({case for suite, case, _ in finals if (suite, case) in known})
    skipped = [
        f"case {case} of suite {suite} is no longer in {', '.join(paths)}: its trials are not "
        "re-graded"
        for suite, case in sorted({(s, c) for s, c, _ in finals})
        if (suite, case) not in known
    ]
    if not wanted:
        raise InvalidInput([f"batch {batch.pk}: {line}" for line in skipped])
    planned = plan_batch(loaded, Selection(cases=wanted))
    for plan in planned:
        plan.variants = []  # the variants that ran are the original's, not the file's
    submission = build_submission(
        planned,
        {},
        max_bytes=settings.BUNDLE_MAX_BYTES,
        own_folders=(settings.PROCTOR_HOME, settings.CACHE_DIR, settings.ARTIFACTS_DIR),
    )
    cases = submission.value["cases"]
    organization = batch.organization
    with transaction.atomic():
        for digest in missing_bundles(organization, submission.bundles):
            packed = submission.bundles[digest]
            save_bundle(organization, digest, packed.kind, packed.data)
        recorded = record_cases(organization, cases)
        by_case = {(c["suite"], c["case"]): (c, r) for c, r in zip(cases, recorded, strict=True)}
        runs = {
            run.pk: run
            for run in Run.objects.filter(
                pk__in={t.run_id for trials in finals.values() for t in trials}
            ).select_related("variant")
        }
        requests = []
        versions: dict[str, int] = {}
        for (suite, case, _variant), trials in finals.items():
            if (suite, case) not in by_case:
                continue
            entry, version = by_case[(suite, case)]
            ran = runs[trials[0].run_id]
            code = dict((ran.spec or {}).get("code") or {})
            code.update(
                RunCode(
                    suite=suite,
                    case=case,
                    bundle=entry["bundle"],
                    eval_module=entry["eval_module"],
                    variant=ran.variant.name,
                    variant_hash=code.get("variant_hash", ""),
                    profile_bundle=code.get("profile_bundle"),
                    source=code.get("source"),
                    record=submission.value["format"],
                ).to_json()
            )
            versions[case] = version.version.number
            requests.append(
                RunRequest(
                    version.version,
                    ran.variant,
                    len(trials),
                    code=code,
                    regrade_of=[t.id for t in trials],
                )
            )
        label = regrade_label(batch, versions)
        regrade, trial_ids = create_batch(
            organization,
            requests,
            options={"regrade_of": batch.pk, "paths": paths, "label": label},
            user=user,
            label=label,
        )
    # This process's own trials run the checks it loaded.
    eval_code.remember(
        submission.case_callables, submission.variant_callables, submission.project_roots
    )
    return regrade, trial_ids, skipped


def regrade_label(batch: Batch, versions: dict[str, int]) -> str:
    """ "re-graded from batch 7 with checks of v3", naming each case when there are several."""
    numbers = set(versions.values())
    if len(versions) == 1 or len(numbers) == 1:
        which = f"v{numbers.pop()}"
    else:
        which = ", ".join(f"{case} v{n}" for case, n in sorted(versions.items()))
    label = f"re-graded from batch {batch.pk} with checks of {which}"
    return label if len(label) <= Batch.LABEL_MAX else label[: Batch.LABEL_MAX - 1] + "…"


def regraded_from(batch: Batch) -> int | None:
    """The batch that ``batch`` re-grades, when it is a re-grade."""
    value = (batch.options or {}).get("regrade_of")
    return int(value) if isinstance(value, int) else None


@dataclass(frozen=True)
class Regraded:
    """One trial of a re-grade beside the trial it graded again."""

    case: str
    variant: str
    index: int
    trial_id: int
    original_id: int
    before: str
    after: str
    error: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


def regraded_trials(regrade: Batch) -> list[Regraded]:
    """Each trial of a re-grade beside the trial it graded again, the changed ones first (two
    queries)."""
    trials = list(
        Trial.objects.filter(run__batch=regrade)
        .select_related("run__case_version__case", "run__variant")
        .order_by("run_id", "index")
    )
    pairs = [(trial, regraded_trial_id(trial)) for trial in trials]
    before = dict(
        Trial.objects.filter(pk__in=[o for _, o in pairs if o is not None]).values_list(
            "pk", "status"
        )
    )
    rows = [
        Regraded(
            case=trial.run.case_version.case.slug,
            variant=trial.run.variant.name,
            index=trial.index,
            trial_id=trial.pk,
            original_id=original or 0,
            before=before.get(original or 0, ""),
            after=trial.status,
            error=trial.error if trial.status == Trial.Status.ERRORED else "",
        )
        for trial, original in pairs
    ]
    return sorted(rows, key=lambda r: not r.changed)
