"""A worker on another machine: `proctor worker` shares only the database and the broker with
the person who ran `proctor eval --no-wait`, and runs every trial from the bundles the batch
recorded, even once the eval folder it came from is gone."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import PROCTOR, proctor_env, run_proctor

from e2e.running import Backend, write_eval

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

# Its own Redis database: no worker of another test may take these tasks.
ELSEWHERE_REDIS_DB = 12

# The answer comes from ../shared/expected.txt, read while the eval is imported; the fixture
# sits in the eval's own folder and is read only when the validator runs.
ELSEWHERE_EVAL = """
import os
from pathlib import Path

from proctor import case, command, profile, suite, variant

HERE = Path(__file__).resolve().parent
WANT = (HERE.parent / "shared" / "expected.txt").read_text().strip()
# Only the submitter has it: the worker runs the variant as recorded.
MODEL = os.environ.get("ELSEWHERE_MODEL", "the-worker-would-say-this")


def wrote_the_answer(ctx):
    return f"answer = {WANT}" in ctx.read_text("answer.txt")


def matches_the_fixture(ctx):
    return (HERE / "fixtures" / "answer.txt").read_text() == ctx.read_text("answer.txt")


elsewhere = suite(
    "elsewhere",
    prompt="Write the answer",
    trials=2,
    cases=[
        case("answer", validate=wrote_the_answer),
        case("fixture", validate=matches_the_fixture),
        case("model", validate=command(f"bash {HERE / 'ran_model.sh'} {MODEL}")),
    ],
    variants=[variant("command", model=MODEL, profile=profile("writer", run=f"bash {HERE.parent / 'agent' / 'write.sh'}"))],
)
"""

WRITER_AGENT = """#!/usr/bin/env bash
echo '{"_tag":"Started","sessionId":"s1","model":"m"}'
echo "$SPHYNX_MODEL" > model.txt
echo 'answer = 6' > answer.txt
echo '{"_tag":"Message","role":"assistant","text":"Wrote 6."}'
echo '{"_tag":"Finished","reason":"done"}'
"""


def write_project(root: Path) -> Path:
    (root / "shared").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "elsewhere"\n')
    (root / "shared" / "expected.txt").write_text("6\n")
    (root / "evals" / "fixtures").mkdir(parents=True)
    (root / "evals" / "fixtures" / "answer.txt").write_text("answer = 6\n")
    write_eval(root / "evals", "elsewhere.eval.py", ELSEWHERE_EVAL)
    (root / "evals" / "ran_model.sh").write_text('grep -qx -- "$1" model.txt\n')
    agent = root / "agent" / "write.sh"
    agent.parent.mkdir()
    agent.write_text(WRITER_AGENT)
    return root


@pytest.fixture
def shared(tmp_path: Path, fresh_postgres_url: str, redis_url: str) -> dict[str, str]:
    """The only settings the submitter and the worker have in common, the database migrated."""
    import redis

    broker = f"{redis_url.rsplit('/', 1)[0]}/{ELSEWHERE_REDIS_DB}"
    redis.Redis.from_url(broker).flushdb()
    values = {"DATABASE_URL": fresh_postgres_url, "REDIS_URL": broker}
    migrated = run_proctor(
        "migrate", "--no-input", cwd=tmp_path, env=proctor_env(tmp_path / "migrate-home", **values)
    )
    assert migrated.returncode == 0, migrated.stderr
    return values


class Worker:
    """A `proctor worker` in an empty folder with a HOME and PROCTOR_HOME of its own."""

    def __init__(self, folder: Path, shared: dict[str, str]) -> None:
        self.folder = folder
        self.home = folder / "proctor-home"
        folder.mkdir()
        self.log = folder.parent / "worker.log"
        self.env = proctor_env(self.home, HOME=str(folder / "home"), **shared)
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log, "w") as out:
            self.process = subprocess.Popen(
                [PROCTOR, "worker", "-c", "2", "--loglevel", "info"],
                cwd=self.folder,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        for _ in range(600):
            if self.process.poll() is not None or " ready." in self.log.read_text():
                break
            time.sleep(0.1)
        assert self.process.poll() is None, f"the worker exited:\n{self.log.read_text()}"

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@pytest.fixture
def worker(tmp_path: Path, shared: dict[str, str]) -> Iterator[Worker]:
    started = Worker(tmp_path / "worker", shared)
    yield started
    started.stop()


def final_statuses(backend: Backend, batch: int, timeout: float = 120) -> dict[str, list[str]]:
    """Each case's trial statuses once none is left to run."""
    sql = (
        "SELECT c.slug, t.status FROM evals_app_trial t JOIN evals_app_run r ON t.run_id = r.id "
        "JOIN evals_app_caseversion v ON r.case_version_id = v.id "
        'JOIN evals_app_case c ON v.case_id = c.id WHERE r.batch_id = ? ORDER BY c.slug, t."index"'
    )
    deadline = time.monotonic() + timeout
    while True:
        rows = backend.rows(sql, batch)
        if all(status in ("passed", "failed", "errored", "timed_out") for _, status in rows):
            break
        assert time.monotonic() < deadline, f"trials still unfinished after {timeout:.0f}s: {rows}"
        time.sleep(0.2)
    by_case: dict[str, list[str]] = {}
    for case, status in rows:
        by_case.setdefault(case, []).append(status)
    return by_case


def test_a_worker_elsewhere_runs_a_batch_whose_eval_folder_is_gone(
    tmp_path: Path, shared: dict[str, str], worker: Worker
):
    project = write_project(tmp_path / "project")
    submitter = Backend("postgres", proctor_env(tmp_path / "submitter-home", **shared))
    third_folder = tmp_path / "somewhere"
    third_folder.mkdir()

    submitted = submitter.eval(
        third_folder,
        "--no-wait",
        "--json",
        str(project / "evals"),
        extra_env={"ELSEWHERE_MODEL": "the-submitters-model"},
    )
    assert submitted.returncode == 0, submitted.stderr
    queued = json.loads(submitted.stdout)
    assert queued["queued"] == 6
    shutil.rmtree(project)
    # Started only now, so no trial can have begun while the files were still there.
    worker.start()

    statuses = final_statuses(submitter, queued["batch"])

    assert statuses == {
        "answer": ["passed", "passed"],
        "fixture": ["passed", "passed"],
        "model": ["passed", "passed"],
    }, worker.log.read_text()[-5000:]
    errors = submitter.rows(
        "SELECT t.error FROM evals_app_trial t JOIN evals_app_run r ON t.run_id = r.id "
        "WHERE r.batch_id = ? AND t.error <> ''",
        queued["batch"],
    )
    assert errors == []
    # The worker ran them from its own unpacked copies; the submitter ran nothing.
    unpacked = list((worker.home / "cache" / "bundles").glob("*/*"))
    assert len(unpacked) == 1, "the eval's bundle, with the agent it names"
    assert (unpacked[0] / "agent" / "write.sh").is_file()
    assert not (tmp_path / "submitter-home" / "cache" / "bundles").exists()
    assert list(third_folder.iterdir()) == []


# promptfoo-style code files that lean on their own folder: a sibling module, a data file
# beside them found through __file__ / __dirname.
SCRIPTS_EVAL = """
from pathlib import Path

from proctor import assertion, case, profile, suite, variant

HERE = Path(__file__).resolve().parent

scripts = suite(
    "scripts",
    prompt="Write the answer",
    cases=[
        case(
            "files",
            validate=[
                assertion("python", "file://checks/grade.py"),
                assertion("javascript", "file://checks/grade.js"),
                assertion("contains", "6", transform="file://checks/shout.js"),
            ],
        )
    ],
    variants=[variant("command", profile=profile("writer", run=f"bash {HERE.parent / 'agent' / 'write.sh'}"))],
)
"""

CHECK_FILES = {
    "helper.py": "def expected():\n    return '6'\n",
    "expected.txt": "Wrote 6.\n",
    "grade.py": (
        "from pathlib import Path\n"
        "from helper import expected\n\n"
        "def get_assert(output, context):\n"
        "    want = (Path(__file__).parent / 'expected.txt').read_text().strip()\n"
        "    return output.strip() == want and expected() in output\n"
    ),
    "util.js": "module.exports = { digit: '6' };\n",
    "grade.js": (
        "const fs = require('fs');\n"
        "const path = require('path');\n"
        "const { digit } = require('./util');\n"
        "module.exports = (output) => output.trim() === "
        "fs.readFileSync(path.join(__dirname, 'expected.txt'), 'utf8').trim() && output.includes(digit);\n"
    ),
    "shout.js": "const { digit } = require('./util');\nmodule.exports = (output) => output.toUpperCase() + digit;\n",
}


def test_code_files_of_assertions_run_among_their_own_files_on_a_worker_elsewhere(
    tmp_path: Path, shared: dict[str, str], worker: Worker
):
    project = write_project(tmp_path / "project")
    for name in list((project / "evals").glob("*.eval.py")):
        name.unlink()
    write_eval(project / "evals", "scripts.eval.py", SCRIPTS_EVAL)
    checks = project / "evals" / "checks"
    checks.mkdir()
    for name, text in CHECK_FILES.items():
        (checks / name).write_text(text)
    submitter = Backend("postgres", proctor_env(tmp_path / "submitter-home", **shared))

    submitted = submitter.eval(tmp_path, "--no-wait", "--json", str(project / "evals"))
    assert submitted.returncode == 0, submitted.stderr
    queued = json.loads(submitted.stdout)
    # Moved away: the worker finds the files in the batch's bundle, not where they were.
    project.rename(tmp_path / "moved")
    worker.start()

    statuses = final_statuses(submitter, queued["batch"])

    checks_run = submitter.rows(
        "SELECT k.name, k.passed, k.message FROM evals_app_check k "
        "JOIN evals_app_trial t ON k.trial_id = t.id JOIN evals_app_run r ON t.run_id = r.id "
        "WHERE r.batch_id = ? ORDER BY k.name",
        queued["batch"],
    )
    assert statuses == {"files": ["passed"]}, (checks_run, worker.log.read_text()[-5000:])
    assert len(checks_run) == 3 and all(passed for _, passed, _ in checks_run), checks_run
