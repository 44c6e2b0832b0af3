"""What ``proctor eval`` does, apart from parsing arguments and printing: load, validate,
record versions and a batch, and wait for it. Kept separate from the management command so it
reads top to bottom and is tested directly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from django.db import transaction

from evals_app.bundle_store import missing_bundles, save_bundle
from evals_app.catalog import ownership_problems, record_cases, record_variant
from evals_app.loading import LoadError, discover, display_path, load_file
from evals_app.models import Batch, Organization
from evals_app.resolution import ResolvedCase, UndescribableValue, resolve_case
from proctor.assertions import MODEL_GRADED_TYPES, SIMILARITY_TYPES
from proctor.conversations import Responder, SimulatedUser
from proctor.definitions import AdaptiveTrials, Case, Suite, Variant
from proctor.rules import Problem, duplicate_problems, suite_problems, trials_problem
from runner.batches.creation import RunRequest, create_batch
from runner.batches.submission import Submission
from runner.batches.variant_options import variant_option_problems
from runner.harnesses import CONVERSATION_RESUME, HARNESSES, PLAN_MODE, SEEDED_CONVERSATION
from runner.jobs import eval_code
from runner.llm import resolve_config
from runner.sandboxes import SANDBOX_KINDS
from runner.trial.spec import RunCode


class InvalidInput(Exception):
    def __init__(self, problems: Sequence[Problem | str]) -> None:
        super().__init__("\n".join(map(str, problems)))
        self.problems = [str(p) for p in problems]


@dataclass
class Selection:
    cases: list[str] = field(default_factory=list)
    variants: list[str] = field(default_factory=list)
    trials: int | AdaptiveTrials | None = None


@dataclass
class Planned:
    resolved: ResolvedCase
    variants: list[Variant]
    trials: int  # adaptive: its minimum
    adaptive: AdaptiveTrials | None = None


def load_suites(paths: Sequence[str]) -> list[tuple[Path, Suite]]:
    files, problems = discover(paths)
    loaded: list[tuple[Path, Suite]] = []
    for path in files:
        try:
            loaded.extend((path, suite) for suite in load_file(path).suites)
        except LoadError as exc:
            problems.extend(exc.problems)
    if not files and not problems:
        problems.append(
            Problem(
                file=display_path(Path(paths[0]) if paths else Path.cwd()),
                message="holds no *.eval.py or *.eval.json files",
            )
        )
    for path, suite in loaded:
        problems.extend(
            suite_problems(
                suite,
                display_path(path),
                known_harnesses=HARNESSES,
                # A plug-in that failed to load is named by its own line, not as unknown.
                known_sandboxes=[*SANDBOX_KINDS, *SANDBOX_KINDS.broken],
            )
        )
        problems.extend(capability_problems(suite, display_path(path)))
    problems.extend(duplicate_problems([(display_path(p), s) for p, s in loaded]))
    if files and not loaded and not problems:
        problems.append(
            Problem(
                file=", ".join(display_path(f) for f in files),
                message="defines no suite at module level",
            )
        )
    if problems:
        raise InvalidInput(problems)
    return loaded


def sandbox_problems(suite: Suite, variant: Variant, cases: list[Case]) -> list[str]:
    """A variant's sandbox that is a plug-in which failed to load, that cannot run the variant
    as it is written (its own ``variant_problems``), or that cannot reach the mocks the suite or
    a case starts on the worker."""
    if not isinstance(variant.sandbox, str):
        return []
    if variant.sandbox in SANDBOX_KINDS.broken:
        return [f"variant {variant.name}: {SANDBOX_KINDS.broken[variant.sandbox]}"]
    kind = SANDBOX_KINDS.get(variant.sandbox)
    if kind is None:
        return []
    problems = kind.variant_problems(variant)
    with_mocks = [str(case.id) for case in cases if case.mocks]
    if not kind.reaches_host_mocks and (suite.mocks or with_mocks):
        where = "the suite" if suite.mocks else f"case {with_mocks[0]}"
        problems.append(
            f"variant {variant.name}: {where} has mocks, which run on the worker, and the "
            f"{variant.sandbox} sandbox runs elsewhere and cannot reach them; use a sandbox on "
            "the worker (local, bwrap, docker) for cases with mocks"
        )
    return problems


def capability_problems(suite: Suite, file: str) -> list[Problem]:
    """Conversation and plan-mode cases on harnesses that cannot run them, found before any
    sandbox is built."""
    problems: list[Problem] = []
    # An item that is no case or variant is named by the suite's own rules.
    cases = [case for case in suite.cases if isinstance(case, Case)]
    for variant in suite.variants:
        if not isinstance(variant, Variant) or not isinstance(variant.harness, str):
            continue
        problems.extend(
            Problem(file=file, suite=suite.id, message=m)
            for m in sandbox_problems(suite, variant, cases)
        )
        harness = HARNESSES.get(variant.harness)
        if harness is None:
            continue
        problems.extend(
            Problem(file=file, suite=suite.id, message=m)
            for m in [*variant_option_problems(variant), *harness.option_problems(variant)]
        )
        capabilities = harness.capabilities_for(variant)
        for case in cases:
            # Only a real True: any other value is refused by the case's own rules, once.
            plan_mode = case.plan_mode is True
            needs = []
            if (case.user is not None or plan_mode) and CONVERSATION_RESUME not in capabilities:
                needs.append(CONVERSATION_RESUME)
            if plan_mode and PLAN_MODE not in capabilities:
                needs.append(PLAN_MODE)
            if (
                isinstance(case.user, SimulatedUser)
                and case.user.initial_messages
                and SEEDED_CONVERSATION not in capabilities
            ):
                needs.append(SEEDED_CONVERSATION)
            if needs:
                why = (
                    "plan mode"
                    if plan_mode
                    else "initial messages"
                    if SEEDED_CONVERSATION in needs
                    else "a conversation"
                )
                problems.append(
                    Problem(
                        file=file,
                        suite=suite.id,
                        case=case.id,
                        message=(
                            f"needs {' and '.join(needs)} for {why}, which harness {variant.harness} "
                            f"does not have under variant {variant.name} (see `proctor harness list`)"
                        ),
                    )
                )
            elif (
                plan_mode
                and not isinstance(case.user, Responder)
                and not harness.declares_plan_file(variant)
            ):
                problems.append(
                    Problem(
                        file=file,
                        suite=suite.id,
                        case=case.id,
                        message=(
                            f"plan mode under variant {variant.name} needs a responder: harness {variant.harness} "
                            "writes no plan file, so only a responder can say when the plan is presented"
                        ),
                    )
                )
    return problems


def endpoint_problems(cases: Sequence[dict[str, Any]], *, where: str = "") -> list[str]:
    """Responders, simulated users and judges need a model endpoint; without one every such
    trial would run the agent only to stop, so refuse the batch up front. Read from the
    recorded definitions, so a server applies the rule to its own settings."""
    if resolve_config().kind != "unconfigured":
        return []
    problems = []
    for entry in cases:
        definition = entry["definition"]
        user = (definition.get("conversation") or {}).get("user") or {}
        kind = str(user.get("type", "")) if isinstance(user, dict) else ""
        needs = {"llm": ["a responder"], "simulated_user": ["a simulated user"]}.get(kind, [])
        checks = definition.get("checks") or []
        if any(
            c.get("kind") == "judge"
            or (c.get("kind") == "assertion" and c.get("type") in MODEL_GRADED_TYPES)
            for c in checks
        ):
            needs.append("a judge")
        if any(c.get("kind") == "assertion" and c.get("type") in SIMILARITY_TYPES for c in checks):
            needs.append("a similarity check (embeddings)")
        if needs:
            problems.append(
                str(
                    Problem(
                        file=entry["module_path"],
                        suite=entry["suite"],
                        case=entry["case"],
                        message=(
                            f"uses {' and '.join(needs)}, which needs a model endpoint{where}: set "
                            "PROCTOR_LLM_BASE_URL (and PROCTOR_LLM_MODEL, PROCTOR_LLM_API_KEY) or PROCTOR_LLM_COMMAND"
                        ),
                    )
                )
            )
    return problems


def plan_batch(loaded: list[tuple[Path, Suite]], selection: Selection) -> list[Planned]:
    """Resolve every selected case (capturing sources) and pick its variants."""
    planned = []
    known_cases = {c.id for _, s in loaded for c in s.cases}
    known_variants = {v.name for _, s in loaded for v in s.variants}
    problems = [
        f"--case {c}: no loaded suite has a case with this id"
        for c in selection.cases
        if c not in known_cases
    ]
    problems += [
        f"--variant {v}: no loaded suite has a variant with this name (known: {', '.join(sorted(known_variants))})"
        for v in selection.variants
        if v not in known_variants
    ]
    if problems:
        raise InvalidInput(problems)
    for path, suite in loaded:
        variants = [
            v for v in suite.variants if not selection.variants or v.name in selection.variants
        ]
        if not variants:
            continue
        for case in suite.cases:
            if selection.cases and case.id not in selection.cases:
                continue
            try:
                resolved = resolve_case(suite, case, path)
            except UndescribableValue as exc:
                problems.append(
                    str(Problem(display_path(path), str(exc), suite=suite.id, case=case.id))
                )
                continue
            trials = selection.trials or suite.trials
            if isinstance(trials, AdaptiveTrials):
                planned.append(Planned(resolved, variants, trials.min, adaptive=trials))
            else:
                planned.append(Planned(resolved, variants, trials))
    if problems:
        raise InvalidInput(problems)
    if not planned:
        raise InvalidInput(
            ["nothing to run: the --case and --variant filters select no case and variant together"]
        )
    return planned


def record_submission(
    organization: Organization, submission: dict[str, Any], *, user=None, on_server: bool = False
) -> tuple[Batch, list[int], int]:
    """Versions, variants, the batch, its runs and trials, all or nothing, from a submission
    (``runner.batches.submission``) whose bundles the organization already stores.

    Returns the batch, its trial ids (enqueue them after the commit) and how many new case
    versions were made. Raises InvalidInput naming every problem, having written nothing."""
    cases, variants = submission["cases"], submission["variants"]
    problems = endpoint_problems(cases, where=" on the server" if on_server else "")
    problems += [
        f"{c['module_path']}: eval module {c['eval_module']!r} must be a relative path inside its bundle"
        for c in cases
        if PurePosixPath(c["eval_module"]).is_absolute()
        or ".." in PurePosixPath(c["eval_module"]).parts
    ]
    problems += ownership_problems(organization, cases)
    options = dict(submission.get("options") or {})
    label = options.get("label") or ""
    if not isinstance(label, str) or len(label) > Batch.LABEL_MAX:
        shown = f"{len(label)} characters" if isinstance(label, str) else f"{label!r:.40}"
        problems.append(f"--label is {shown}; a batch's label is text of at most {Batch.LABEL_MAX}")
    max_cost = options.get("max_cost_usd")
    if max_cost is not None and (
        isinstance(max_cost, bool)
        or not isinstance(max_cost, int | float)
        or not 0 < max_cost < float("inf")
    ):
        problems.append(f"--max-cost is {max_cost!r:.40}; a batch's budget is US dollars above 0")
    referenced = [c["bundle"] for c in cases]
    referenced += [c["source"]["bundle"] for c in cases if c.get("source")]
    referenced += [v["profile_bundle"] for v in variants if v.get("profile_bundle")]
    problems += [
        f"bundle {digest} was not uploaded; send the bundles before the batch"
        for digest in missing_bundles(organization, referenced)
    ]
    for run in submission["runs"]:
        try:
            _adaptive_rule(run.get("adaptive"))
        except InvalidInput as exc:
            problems += exc.problems
    if problems:
        raise InvalidInput(problems)
    with transaction.atomic():
        recorded = record_cases(organization, cases)
        variant_rows = [record_variant(organization, v) for v in variants]
        requests = []
        for run in submission["runs"]:
            case, variant = cases[run["case"]], variants[run["variant"]]
            code = RunCode(
                suite=case["suite"],
                case=case["case"],
                bundle=case["bundle"],
                eval_module=case["eval_module"],
                variant=variant["name"],
                variant_hash=variant["spec_hash"],
                profile_bundle=variant.get("profile_bundle"),
                source=case.get("source"),
                record=submission["format"],
            )
            rule = _adaptive_rule(run.get("adaptive"))
            requests.append(
                RunRequest(
                    recorded[run["case"]].version,
                    variant_rows[run["variant"]],
                    rule.min if rule is not None else run["trials"],
                    code=code.to_json(),
                    adaptive=rule,
                )
            )
        batch, trial_ids = create_batch(
            organization,
            requests,
            options=options,
            user=user,
            label=label,
            max_cost_usd=max_cost,
        )
    return batch, trial_ids, sum(1 for r in recorded if r.created)


def _adaptive_rule(recorded: Any) -> AdaptiveTrials | None:
    """A submitted run's adaptive rule ({"min", "max", "threshold", "confidence"}), checked by
    the suite's own rule; None for a fixed count. Raises InvalidInput of one sentence."""
    if recorded is None:
        return None
    try:
        rule = AdaptiveTrials(
            min=recorded["min"],
            max=recorded["max"],
            threshold=recorded["threshold"],
            confidence=recorded["confidence"],
        )
    except (TypeError, KeyError):
        raise InvalidInput(
            ["a run's adaptive trials must be an object of min, max, threshold and confidence"]
        ) from None
    if problem := trials_problem(rule):
        raise InvalidInput([f"a run's trials: {problem}"])
    return rule


def record_locally(
    organization: Organization, submission: Submission, *, user=None
) -> tuple[Batch, list[int], int]:
    """Store the submission's bundles in this installation and record its batch, in one
    transaction: a refused batch leaves no bundle behind either."""
    with transaction.atomic():
        for digest in missing_bundles(organization, submission.bundles):
            packed = submission.bundles[digest]
            save_bundle(organization, digest, packed.kind, packed.data)
        recorded = record_submission(organization, submission.value, user=user)
    # This process's own trials (and its forked workers') run what it loaded.
    eval_code.remember(
        submission.case_callables, submission.variant_callables, submission.project_roots
    )
    return recorded
