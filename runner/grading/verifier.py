"""A task case's verifier: its hidden tests, run in its container after the agent.

The task's ``tests/`` goes into the container at ``/tests`` only now (a Terminal-Bench task's
``run-tests.sh`` with it), ``/logs/verifier`` is emptied of anything the agent left there, and
the entry point (``tests/test.sh``; Terminal-Bench: ``run-tests.sh``) runs from the workspace
with the verifier's own time limit, user and env. What it leaves decides the trial:

- Harbor: ``/logs/verifier/reward.txt`` (one number, the check ``reward``) or ``reward.json``
  (each named number a check of its own, with its score); per-test results from
  ``/logs/verifier/ctrf.json`` become checks of kind ``test``, each with its message.
- Terminal-Bench: the pytest result lines of its output, each a ``test`` check; the reward is
  1 when every test passed, else 0.

The trial passes when every reward is at least the task's threshold (1.0 unless lowered). No
reward, an unreadable one, or a verifier past its limit is a verifier error: the trial errors
with that sentence, never fails silently. The verifier's logs are kept as artifacts.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proctor.tasks import HARBOR, Step, Task
from runner.core.results import CheckResult, clip
from runner.sandboxes.task_container import LOGS, VERIFIER_LOGS, TaskSandbox

TESTS_FOLDER = "/tests"
REWARD_KIND = "reward"
TEST_KIND = "test"
# The per-test results a verifier writes, in the CTRF format (pytest --ctrf).
CTRF_FILE = "ctrf.json"
# A pytest result line: the -rA summary ("PASSED tests/test_x.py::test_y") or the verbose one
# ("tests/test_x.py::test_y PASSED").
_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+(\S+::\S+)(?:\s+-\s+(.*))?$")
_VERBOSE = re.compile(r"^(\S+::\S+)\s+(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
_GOOD = {"PASSED", "SKIPPED", "XFAIL", "XPASS", "passed", "skipped", "pending"}
# Run as root before each verifier: what the agent (or an earlier step) left in /tests and
# /logs/verifier is gone, moved aside where the agent made it undeletable.
CLEAR_SCRIPT = f"""
rm -rf {TESTS_FOLDER} {VERIFIER_LOGS} 2>/dev/null
[ -e {VERIFIER_LOGS} ] && mv {VERIFIER_LOGS} {LOGS}/.left-before-verifier-$$
mkdir -p {VERIFIER_LOGS} && chmod 777 {VERIFIER_LOGS} && [ ! -e {TESTS_FOLDER} ] \\
  && [ -z "$(ls -A {VERIFIER_LOGS})" ]
"""
# The largest verifier log file kept as an artifact.
MAX_ARTIFACT_BYTES = 1 << 20


@dataclass
class Verification:
    checks: list[CheckResult] = field(default_factory=list)
    rewards: dict[str, float] = field(default_factory=dict)
    error: str = ""  # the verifier error, when there is one
    threshold: float = 1.0

    @property
    def passed(self) -> bool:
        return (
            not self.error
            and bool(self.rewards)
            and all(value >= self.threshold for value in self.rewards.values())
        )

    @property
    def score(self) -> float | None:
        return min(self.rewards.values()) if self.rewards else None


def verify(
    sandbox: TaskSandbox,
    task: Task,
    *,
    artifact: Callable[[str, str], None],
    step: Step | None = None,
) -> Verification:
    """Run the task's verifier (a step's, with the task's tests under the step's own) in
    ``sandbox`` and read its result (a few engine requests and two processes in the
    container). A step's checks are named after it ("scaffold: reward"), its artifacts kept
    under ``steps/<name>/``."""
    result = Verification(threshold=task.reward_threshold)
    entry = Path(task.tests_script).name
    script = task.tests_script
    limit = task.verifier_timeout_s
    env = {"TEST_DIR": TESTS_FOLDER, **task.verifier_env}
    prefix = ""
    if step is not None:
        if (task.path / step.folder / task.tests_script).is_file():
            script = f"{step.folder}/{task.tests_script}"
        limit = step.verifier_timeout_s or limit
        env.update(step.verifier_env)
        prefix = f"steps/{step.name}/"
    # Only the verifier's own files count: the agent may have written to /logs/verifier, and
    # an earlier step's tests are not this one's.
    cleared = sandbox.run(["sh", "-c", CLEAR_SCRIPT], user="0", timeout_s=60)
    if cleared.exit_code != 0:
        result.error = (
            f"verifier error: {TESTS_FOLDER} and {VERIFIER_LOGS} could not be cleared before "
            f"the verifier ran: {cleared.output.strip()[:200]}"
        )
        return result
    also = {} if task.format == HARBOR else {entry: task.path / task.tests_script}
    sandbox.put_folder(task.path / "tests", TESTS_FOLDER, also=also)
    if step is not None and (task.path / step.folder / "tests").is_dir():
        sandbox.put_folder(task.path / step.folder / "tests", TESTS_FOLDER)
    lines: list[str] = []
    run = sandbox.run(
        ["bash", f"{TESTS_FOLDER}/{entry}"],
        env=env,
        cwd=sandbox.workspace,
        timeout_s=limit,
        on_line=lambda _stream, line: lines.append(line),
        user=task.verifier_user,
    )
    output = "\n".join(lines)
    artifact(f"{prefix}verifier/output.log", output + "\n" if output else "")
    with tempfile.TemporaryDirectory(prefix="proctor-verifier-") as folder:
        logs = Path(folder)
        sandbox.copy_out(VERIFIER_LOGS, logs)
        _keep_logs(logs, artifact, prefix)
        if run.timed_out:
            result.error = f"verifier error: {script} ran past its {limit:g} s limit"
        elif task.format == HARBOR:
            _read_rewards(logs, script, result, output)
            _read_ctrf(logs / CTRF_FILE, result)
        else:
            _read_pytest(output, script, result)
    result.checks[:0] = _reward_checks(result)
    if step is not None:
        for check in result.checks:
            check.name = f"{step.name}: {check.name}"
        if result.error:
            result.error = f"{result.error} (step {step.name})"
    return result


def _keep_logs(logs: Path, artifact: Callable[[str, str], None], prefix: str = "") -> None:
    for path in sorted(logs.rglob("*")):
        if path.is_file() and path.stat().st_size <= MAX_ARTIFACT_BYTES:
            text = path.read_bytes().decode("utf-8", "replace")
            artifact(f"{prefix}logs/verifier/{path.relative_to(logs).as_posix()}", text)


def _tail(output: str) -> str:
    last = [line for line in output.splitlines() if line.strip()][-3:]
    return f"; its output ends: {' | '.join(last)}" if last else "; it printed nothing"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _read_rewards(logs: Path, where: str, result: Verification, output: str) -> None:
    text_file, json_file = logs / "reward.txt", logs / "reward.json"
    if json_file.is_file():
        try:
            value = json.loads(json_file.read_text(encoding="utf-8", errors="replace"))
        except ValueError as exc:
            result.error = f"verifier error: {where} wrote a reward.json that is not JSON ({exc})"
            return
        if not isinstance(value, dict) or not value:
            result.error = f"verifier error: {where} wrote a reward.json that is not an object of named numbers"
            return
        for name, number in value.items():
            reward = _number(number)
            if reward is None:
                result.error = (
                    f"verifier error: {where} wrote reward {name!r} = {number!r}, not a number"
                )
                return
            result.rewards[str(name)] = reward
    elif text_file.is_file():
        text = text_file.read_text(encoding="utf-8", errors="replace").strip()
        try:
            reward = float(text)
        except ValueError:
            reward = math.nan
        if not math.isfinite(reward):
            result.error = f"verifier error: {where} wrote reward.txt {text[:40]!r}, not a number"
            return
        result.rewards["reward"] = reward
    else:
        result.error = (
            f"verifier error: {where} wrote no reward ({VERIFIER_LOGS}/reward.txt or "
            f"reward.json){_tail(output)}"
        )


def _reward_checks(result: Verification) -> list[CheckResult]:
    return [
        CheckResult(
            name=name,
            kind=REWARD_KIND,
            passed=value >= result.threshold,
            score=value,
            message=f"reward {value:g}"
            + ("" if value >= result.threshold else f" < {result.threshold:g}"),
        )
        for name, value in result.rewards.items()
    ]


def _read_ctrf(file: Path, result: Verification) -> None:
    """Per-test checks from a CTRF report; a report that cannot be read adds none."""
    if not file.is_file():
        return
    try:
        tests = json.loads(file.read_text(encoding="utf-8", errors="replace"))["results"]["tests"]
    except (ValueError, KeyError, TypeError):
        return
    for test in tests if isinstance(tests, list) else []:
        if not isinstance(test, dict) or not isinstance(test.get("name"), str):
            continue
        status = str(test.get("status", ""))
        message = test.get("message") or test.get("trace") or status
        result.checks.append(
            CheckResult(
                name=test["name"],
                kind=TEST_KIND,
                passed=status in _GOOD,
                message=clip(str(message), 2_000),
                duration_ms=int(test["duration"]) if isinstance(test.get("duration"), int) else 0,
            )
        )


def _read_pytest(output: str, script: str, result: Verification) -> None:
    """Terminal-Bench's pytest parser: one check per result line; reward 1 when all passed."""
    seen: dict[str, CheckResult] = {}
    for line in output.splitlines():
        line = line.strip()
        match = _SUMMARY.match(line)
        if match:
            status, name, message = match.group(1), match.group(2), match.group(3) or ""
        elif match := _VERBOSE.match(line):
            name, status, message = match.group(1), match.group(2), ""
        else:
            continue
        seen[name] = CheckResult(
            name=name, kind=TEST_KIND, passed=status in _GOOD, message=message or status.lower()
        )
    if not seen:
        result.error = (
            f"verifier error: {script} printed no pytest results (run pytest with "
            f"-rA){_tail(output)}"
        )
        return
    result.checks.extend(seen.values())
    result.rewards["tests"] = 1.0 if all(c.passed for c in seen.values()) else 0.0
