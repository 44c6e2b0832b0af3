"""The validation panel: each check of a case version with the source that graded it, its pass
rate across a run's trials and its result on each trial; for a weighted assertion also its type,
weight and metric; for a model judge the consultation that holds what it was shown.

The source is the text captured when the version was made (``CaseVersion.sources``), never the
eval file as it is today, so a reader sees exactly the code that produced the result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.utils.safestring import SafeString

from dashboard.highlighting import highlight_code, source_lines
from evals_app.models import CaseVersion, Check, Consultation, Run, Trial


@dataclass
class CheckReport:
    index: int
    name: str
    kind: str
    # Highlighted source, and where it came from ("evals/api.eval.py, lines 10–14").
    source: SafeString | None
    source_label: str
    # Why there is no source to show, when there is none.
    source_missing: str = ""
    results: list[Check] = field(default_factory=list)
    # Weighted assertions: the assertion type ("icontains", "llm-rubric"...), how much it
    # counts (0: information only) and the metric it is charted under.
    assertion_type: str = ""
    weight: float | None = None
    metric: str = ""
    # The trial page: the judge's consultation (its prompt and raw answer), when one was kept.
    consultation: Consultation | None = None

    @property
    def is_assertion(self) -> bool:
        return self.kind == "assertion"

    @property
    def mean_score(self) -> float | None:
        scores = [check.score for check in self.results if check.score is not None]
        return sum(scores) / len(scores) if scores else None

    @property
    def passed(self) -> int:
        return sum(1 for check in self.results if check.passed)

    @property
    def total(self) -> int:
        return len(self.results)

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.total if self.total else None

    @property
    def failed(self) -> bool:
        return any(not check.passed for check in self.results)


def run_check_reports(run: Run) -> list[CheckReport]:
    """Every check of the run's case version with its result on each trial (one query for the
    checks; ``run.case_version`` should already be loaded)."""
    checks = list(
        Check.objects.filter(trial__run=run)
        .select_related("trial")
        .order_by("index", "trial__index")
    )
    return _reports(run.case_version, checks)


def trial_check_reports(trial: Trial) -> list[CheckReport]:
    """Every check of the trial's case version with this trial's result, and the judges'
    consultations (two queries)."""
    checks = list(Check.objects.filter(trial=trial).select_related("trial").order_by("index"))
    reports = _reports(trial.run.case_version, checks)
    judged = {
        consultation.check_index: consultation
        for consultation in Consultation.objects.filter(
            trial=trial, kind=Consultation.Kind.JUDGE
        ).order_by("created_at", "id")
    }
    for report in reports:
        report.consultation = judged.get(report.index)
    return reports


def _reports(version: CaseVersion, checks: list[Check]) -> list[CheckReport]:
    defined = {i: spec for i, spec in enumerate(version.definition.get("checks") or [])}
    by_index: dict[int, list[Check]] = {}
    for check in checks:
        by_index.setdefault(check.index, []).append(check)
    reports = []
    for index in sorted(set(defined) | set(by_index)):
        results = by_index.get(index, [])
        spec = defined.get(index) or {}
        # A check recorded without a definition entry (a task case's rewards and tests, from
        # its verifier) still shows its results.
        if not spec and results:
            spec = {"kind": results[0].kind, "name": results[0].name, **results[0].source_ref}
            spec.update(_verifier_of(version.definition.get("task"), results[0].name))
        reports.append(_report(index, spec, results, version.sources or {}))
    return reports


def _verifier_of(task: Any, check_name: str) -> dict[str, Any]:
    """What decided a task case's check: the verifier script that wrote it (a step's, for a
    check named after its step: "scaffold: reward"), its limit and the reward threshold."""
    if not isinstance(task, dict):
        return {}
    script = task.get("tests_script")
    limit = task.get("verifier_timeout_s")
    step_name, sep, _ = check_name.partition(": ")
    step = next((s for s in task.get("steps") or [] if sep and s.get("name") == step_name), None)
    if step is not None:
        script = f"{script} (steps/{step_name}/tests/ over the task's tests/)"
        limit = step.get("verifier_timeout_s") or limit
    return {
        "verifier": script,
        "verifier_timeout_s": limit,
        "reward_threshold": task.get("reward_threshold"),
        "task_folder": task.get("folder"),
    }


def _report(
    index: int, spec: dict[str, Any], results: list[Check], sources: dict[str, str]
) -> CheckReport:
    kind = spec.get("kind", "")
    name = spec.get("name") or (results[0].name if results else f"check {index + 1}")
    report = CheckReport(
        index=index, name=name, kind=kind, source=None, source_label="", results=results
    )
    if kind == "assertion":
        _describe_assertion(report, spec)
    if kind == "command":
        report.source = highlight_code(spec.get("command", ""), "shell")
        report.source_label = "shell command"
    elif "path" in spec and "start" in spec:
        path, start, end = spec["path"], int(spec["start"]), int(spec.get("end", spec["start"]))
        report.source_label = f"{path}, lines {start}–{end}"
        text = sources.get(path)
        if text is None:
            report.source_missing = "The source was not captured for this version."
        else:
            report.source = highlight_code(
                source_lines(text, start, end), "python", first_line=start
            )
    elif isinstance(spec.get("script"), dict) or spec.get("transform"):
        _describe_code(report, spec)
    elif kind == "judge" and spec.get("rubric"):
        report.source = highlight_code(str(spec["rubric"]), "text")
        report.source_label = "rubric"
    elif report.assertion_type == "llm-rubric" and spec.get("value"):
        report.source = highlight_code(str(spec["value"]), "text")
        report.source_label = "rubric"
    else:
        shown = {k: v for k, v in spec.items() if k not in ("kind", "name")}
        if shown:
            report.source = highlight_code(json.dumps(shown, indent=2, ensure_ascii=False), "json")
            report.source_label = "definition"
    return report


def _describe_code(report: CheckReport, spec: dict[str, Any]) -> None:
    """A promptfoo-style assertion's JavaScript or Python as it graded (the file's text was
    captured with the version), after the transforms its output went through first."""
    parts: list[str] = []
    labels: list[str] = []
    for step in spec.get("transform") or []:
        parts.append(_code_block(step, "transform"))
        labels.append(f"transform {_code_name(step)}")
    script = spec.get("script")
    if isinstance(script, dict):
        parts.append(_code_block(script, "assertion"))
        labels.append(_code_name(script))
    else:
        shown = {k: v for k, v in spec.items() if k not in ("kind", "name", "transform")}
        parts.append(json.dumps(shown, indent=2, ensure_ascii=False))
    language = script.get("language", "javascript") if isinstance(script, dict) else "javascript"
    report.source = highlight_code("\n\n".join(parts), language)
    report.source_label = ", then ".join(labels) if labels else "definition"


def _code_name(script: dict[str, Any]) -> str:
    language = "JavaScript" if script.get("language") == "javascript" else "Python"
    if script.get("path"):
        function = f":{script['function']}" if script.get("function") else ""
        return f"{language} file://{script['path']}{function}"
    return f"inline {language}"


def _code_block(script: dict[str, Any], role: str) -> str:
    comment = "#" if script.get("language") == "python" else "//"
    return f"{comment} {role}: {_code_name(script)}\n{script.get('text', '')}".rstrip()


def _describe_assertion(report: CheckReport, spec: dict[str, Any]) -> None:
    """Type from the definition; weight and metric as recorded with the result (what was
    applied), else as defined."""
    first = report.results[0] if report.results else None
    report.assertion_type = str(spec.get("type") or "")
    weight = first.weight if first is not None and first.weight is not None else spec.get("weight")
    report.weight = float(weight) if isinstance(weight, int | float) else None
    report.metric = (first.metric if first is not None else "") or str(spec.get("metric") or "")
