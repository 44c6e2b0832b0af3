"""``proctor eval --junit PATH``: the batch as a JUnit XML report for CI systems.

One ``<testsuite>`` per suite, one ``<testcase>`` per case x variant (classname
"suite.case", name the variant). A testcase passes when every one of its trials passed; else it
carries a ``<failure>`` (a trial failed or timed out: the agent's result) or, when every trial
that did not pass errored, an ``<error>`` (the infrastructure broke, not the agent), whose text
lists each such trial with its failed check messages and its dashboard link. A testcase with
no finished trial is ``<skipped>``.

Built from the report ``proctor eval --json`` prints, so a batch run on a server writes the
same file as one run here. The file is written whole or not at all.
"""

from __future__ import annotations

import os
import re
import secrets
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FINAL = ("passed", "failed", "timed_out", "errored")

# Characters XML 1.0 cannot hold at all, even escaped (an agent's answer may print them).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_safe(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def junit_xml(report: dict[str, Any]) -> bytes:
    """The JUnit XML of a ``batch_report`` (runner.batches.report), as UTF-8 bytes."""
    suites: dict[str, list[dict[str, Any]]] = {}
    for run in report["runs"]:
        suites.setdefault(run["suite"], []).append(run)
    label = report.get("label") or ""
    root = ET.Element("testsuites", name=f"proctor batch {report['batch']}")
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    seconds = 0.0
    for name in sorted(suites):
        element, counts, spent = _suite(name, suites[name], report, label)
        root.append(element)
        for key in totals:
            totals[key] += counts[key]
        seconds += spent
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", str(totals["errors"]))
    root.set("time", f"{seconds:.3f}")
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def junit_path_problem(path: str | Path) -> str | None:
    """Why the report could not be written at ``path`` (checked before the batch runs, so a
    typo costs no run), or None: the path is a folder, or its nearest existing parent is not
    a writable folder."""
    target = Path(path)
    if target.is_dir():
        return f"--junit {path}: is a folder; give a file name such as {target / 'junit.xml'}"
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"--junit {path}: {parent} is not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"--junit {path}: cannot write in {parent}"
    return None


def write_junit(report: dict[str, Any], path: str | Path) -> Path:
    """Write the report's JUnit XML to ``path`` atomically (a temporary file renamed over it),
    creating its folder; returns the path written."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    data = junit_xml(report)
    # Made with the mode any new file gets here (0666 less the umask), which a CI job's other
    # steps can read: mkstemp's 0600 made a report that only its writer could open.
    temporary = target.parent / f".junit-{os.getpid()}-{secrets.token_hex(4)}.xml"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def _suite(
    name: str, runs: list[dict[str, Any]], report: dict[str, Any], label: str
) -> tuple[ET.Element, dict[str, int], float]:
    suite = ET.Element("testsuite", name=name)
    properties = ET.SubElement(suite, "properties")
    for key, value in (
        ("proctor.batch", str(report["batch"])),
        ("proctor.label", label),
        ("proctor.url", report.get("url") or ""),
    ):
        if value:
            ET.SubElement(properties, "property", name=key, value=_xml_safe(value))
    counts = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    spent = 0.0
    for run in sorted(runs, key=lambda r: (r["case"], r["variant"])):
        case, outcome, seconds = _testcase(run)
        suite.append(case)
        counts["tests"] += 1
        if outcome:
            counts[outcome] += 1
        spent += seconds
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", f"{spent:.3f}")
    return suite, counts, spent


def _testcase(run: dict[str, Any]) -> tuple[ET.Element, str, float]:
    """The testcase of one run, what it counts as ("", failures, errors or skipped), and its
    seconds."""
    trials = run["trials"]
    seconds = sum((t.get("duration_ms") or 0) for t in trials) / 1000
    case = ET.Element(
        "testcase",
        classname=_xml_safe(f"{run['suite']}.{run['case']}"),
        name=_xml_safe(run["variant"]),
        time=f"{seconds:.3f}",
    )
    # The run's page goes in system-out with its trials' links: the JUnit schemas CI tools
    # validate against (Jenkins' junit-10.xsd, say) allow no other attribute on a testcase.
    finished = [t for t in trials if t["status"] in FINAL]
    unsuccessful = [t for t in finished if t["status"] != "passed"]
    passed = len(finished) - len(unsuccessful)
    summary = f"{passed}/{len(trials)} trials passed (case version {run['case_version']})"
    outcome = ""
    if not finished:
        budget = any(t["status"] == "budget_exhausted" for t in trials)
        message = "stopped by the batch's budget (budget_exhausted)" if budget else ""
        ET.SubElement(case, "skipped", message=message or "no trial finished")
        outcome = "skipped"
    elif unsuccessful:
        infrastructure = all(t["status"] == "errored" for t in unsuccessful)
        element = ET.SubElement(
            case,
            "error" if infrastructure else "failure",
            message=summary,
            type="errored" if infrastructure else _kinds(unsuccessful),
        )
        element.text = _xml_safe("\n".join(_trial_lines(unsuccessful)))
        outcome = "errors" if infrastructure else "failures"
    out = ET.SubElement(case, "system-out")
    lines = [f"run: {run['url']}"] if run.get("url") else []
    lines += [
        f"trial #{t['index']} {t['status']}" + (f": {t['url']}" if t.get("url") else "")
        for t in trials
    ]
    out.text = _xml_safe("\n".join(lines))
    return case, outcome, seconds


def _kinds(trials: Iterable[dict[str, Any]]) -> str:
    return "+".join(sorted({t["status"] for t in trials if t["status"] != "errored"}))


def _trial_lines(trials: Iterable[dict[str, Any]]) -> list[str]:
    lines = []
    for trial in trials:
        where = f" ({trial['url']})" if trial.get("url") else ""
        lines.append(f"trial #{trial['index']} {trial['status']}{where}")
        if trial.get("error"):
            lines.append(f"  error: {trial['error']}")
        for check in trial.get("checks") or []:
            if not check["passed"]:
                message = f": {check['message']}" if check.get("message") else ""
                lines.append(f"  {check['name']} failed{message}")
    return lines
