"""A batch records the code it ran (the eval module and the data it read, the agent's profile
folder, a local repository's commit) as bundles, so a rerun runs exactly that code whatever
happened to the files since: edited, moved or deleted. What goes into a bundle is bounded,
leaves dependencies out, and is stored once."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path
from typing import Any

from e2e.running import Backend, run_hang_aware, write_eval

SUMS_EVAL = """
from pathlib import Path

from proctor import case, profile, suite, variant

AGENT = Path(__file__).resolve().parent.parent / "agent"
{prelude}

def wrote_the_answer(ctx):
    return f"answer = {want}" in ctx.read_text("answer.txt")


sums = suite(
    "sums",
    prompt="Write the answer",
    trials=2,
    cases=[case("answer", validate={validate}{case_fields})],
    variants=[variant("command", profile=profile("writer", dir=str(AGENT), run='bash "$PROCTOR_PROFILE_DIR/write.sh"'))],
)
"""

WRITER_AGENT = """#!/usr/bin/env bash
echo '{{"_tag":"Started","sessionId":"s1","model":"m"}}'
echo 'answer = {answer}' > answer.txt
echo '{{"_tag":"Message","role":"assistant","text":"Wrote {answer}."}}'
echo '{{"_tag":"Finished","reason":"done"}}'
"""

# A rerun as the dashboard and the API start one (runner.batches.reruns), in a process of its
# own whose current folder holds nothing; the embedded pool runs the queued trials.
RERUN = """
import json, sys, time

import django

django.setup()
from evals_app.models import Batch
from runner.batches.report import batch_report
from runner.batches.reruns import rerun_batch

new = rerun_batch(Batch.objects.get(pk=int(sys.argv[1])), user=None)
deadline = time.monotonic() + 120
while not Batch.objects.filter(pk=new.pk, status=Batch.Status.FINISHED).exists():
    if time.monotonic() > deadline:
        sys.exit("the rerun did not finish in 120 s")
    time.sleep(0.1)
print(json.dumps({"parent": new.parent_id, **batch_report(Batch.objects.get(pk=new.pk))}))
"""


class Project:
    """A project folder (pyproject.toml at its root) holding ``evals/sums.eval.py`` and the agent
    it runs, ``agent/write.sh``."""

    def __init__(self, backend: Backend, root: Path) -> None:
        self.backend = backend
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        (root / "pyproject.toml").write_text('[project]\nname = "sums"\n')

    @property
    def evals(self) -> Path:
        return self.root / "evals"

    def write(
        self,
        *,
        want: str = "6",
        prelude: str = "",
        validate: str = "wrote_the_answer",
        case_fields: str = "",
    ) -> None:
        """Write the eval file: its validator wants ``answer = <want>``; ``prelude`` goes above
        the validator, ``validate`` and ``case_fields`` into its case."""
        text = SUMS_EVAL.format(
            want=want, prelude=prelude, validate=validate, case_fields=case_fields
        )
        write_eval(self.evals, "sums.eval.py", text)

    def write_agent(self, answer: str = "6") -> None:
        agent = self.root / "agent" / "write.sh"
        agent.parent.mkdir(parents=True, exist_ok=True)
        agent.write_text(WRITER_AGENT.format(answer=answer))
        agent.chmod(0o755)

    def eval(self, **env: str) -> subprocess.CompletedProcess:
        return self.backend.eval(self.root, "--json", extra_env=env)

    def eval_json(self) -> dict[str, Any]:
        return self.backend.eval_json(self.root)

    def move_to(self, root: Path) -> None:
        shutil.move(self.root, root)
        self.root = root


def rerun(backend: Backend, batch: int, cwd: Path, *, forget_unpacked: bool = False) -> dict:
    """Rerun ``batch`` and run its trials; the new batch's report (plus its parent). With
    ``forget_unpacked`` the worker's unpacked copies are deleted first, so the bundles are read
    from the database again."""
    if forget_unpacked:
        shutil.rmtree(backend.home / "cache" / "bundles", ignore_errors=True)
    cwd.mkdir(parents=True, exist_ok=True)
    result = run_hang_aware(
        [sys.executable, "-c", RERUN, str(batch)],
        cwd=cwd,
        env={**backend.env, "DJANGO_SETTINGS_MODULE": "proctor.site.settings"},
        timeout=180,
    )
    assert result.returncode == 0, f"stdout: {result.stdout}\nstderr: {result.stderr}"
    report = json.loads(result.stdout)
    assert report["parent"] == batch
    return report


def outcomes(report: dict) -> list[tuple[int, str, str]]:
    """(case version, status, error) of every trial of the report's one run."""
    (run,) = report["runs"]
    return [(run["case_version"], t["status"], t["error"]) for t in run["trials"]]


def statuses(report: dict) -> list[str]:
    (run,) = report["runs"]
    return [t["status"] for t in run["trials"]]


def project_bundle(backend: Backend, batch: int) -> str:
    """The digest of the bundle holding the eval module the batch's run ran."""
    (spec,) = backend.rows("SELECT spec FROM evals_app_run WHERE batch_id = ?", batch)
    return backend.json_value(spec[0])["code"]["bundle"]


def bundle_files(backend: Backend, digest: str) -> dict[str, bytes]:
    """What a stored tree bundle holds, read from its gzip'd tar."""
    (data,) = backend.rows("SELECT data FROM evals_app_bundle WHERE digest = ?", digest)[0]
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(bytes(data))), mode="r:") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def git(repository: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=Alice", "-c", "user.email=alice@example.com", *args],
        cwd=repository,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


# --- reruns run the recorded code ------------------------------------------------------------


def test_a_rerun_runs_the_recorded_validator_after_it_is_edited_moved_and_deleted(
    backend: Backend, tmp_path: Path
):
    project = Project(backend, tmp_path / "project")
    project.write(want="6")
    project.write_agent(answer="6")
    first = project.eval_json()
    assert outcomes(first) == [(1, "passed", ""), (1, "passed", "")]

    # The validator now wants 7: run as it is, the case fails under its new version...
    project.write(want="7")
    assert outcomes(project.eval_json()) == [(2, "failed", ""), (2, "failed", "")]
    # ...while a rerun of the first batch runs version 1, which passes as it did.
    elsewhere = tmp_path / "elsewhere"
    assert outcomes(rerun(backend, first["batch"], elsewhere)) == [
        (1, "passed", ""),
        (1, "passed", ""),
    ]

    project.move_to(tmp_path / "moved" / "project")
    assert outcomes(rerun(backend, first["batch"], elsewhere)) == [
        (1, "passed", ""),
        (1, "passed", ""),
    ]

    shutil.rmtree(project.root)
    assert outcomes(rerun(backend, first["batch"], elsewhere, forget_unpacked=True)) == [
        (1, "passed", ""),
        (1, "passed", ""),
    ]


def test_an_edited_agent_is_a_new_variant_and_a_rerun_keeps_the_old_agent(
    sqlite_backend: Backend, tmp_path: Path
):
    project = Project(sqlite_backend, tmp_path / "project")
    project.write(want="6")
    project.write_agent(answer="6")
    before = project.eval_json()

    project.write_agent(answer="7")
    after = project.eval_json()

    assert outcomes(before) == [(1, "passed", ""), (1, "passed", "")]
    assert outcomes(after) == [(1, "failed", ""), (1, "failed", "")], "the case did not change"
    variants = sqlite_backend.rows(
        "SELECT name, spec_hash, profile_digest FROM evals_app_variant ORDER BY id"
    )
    assert [name for name, _, _ in variants] == ["command:writer", "command:writer"]
    (old_hash, old_digest), (new_hash, new_digest) = [row[1:] for row in variants]
    assert old_hash != new_hash
    assert old_digest != new_digest and len(old_digest) == len(new_digest) == 64
    ran = sqlite_backend.rows(
        "SELECT r.batch_id, v.profile_digest FROM evals_app_run r "
        "JOIN evals_app_variant v ON r.variant_id = v.id ORDER BY r.batch_id"
    )
    assert ran == [(before["batch"], old_digest), (after["batch"], new_digest)]

    # Moving the project changes neither the variant nor the case.
    project.move_to(tmp_path / "moved")
    moved = project.eval_json()
    assert outcomes(moved) == [(1, "failed", ""), (1, "failed", "")]
    assert sqlite_backend.scalar("SELECT COUNT(*) FROM evals_app_variant") == 2

    shutil.rmtree(project.root)
    elsewhere = tmp_path / "elsewhere"
    assert statuses(rerun(sqlite_backend, before["batch"], elsewhere)) == ["passed", "passed"]
    assert statuses(rerun(sqlite_backend, after["batch"], elsewhere)) == ["failed", "failed"]


def test_a_data_file_read_at_import_from_elsewhere_in_the_project_travels_with_the_eval(
    sqlite_backend: Backend, tmp_path: Path
):
    project = Project(sqlite_backend, tmp_path / "project")
    expected = project.root / "shared" / "expected.txt"
    expected.parent.mkdir()
    expected.write_text("6\n")
    # The eval reads what it wants from ../shared/expected.txt while it is imported.
    project.write(
        want="{WANT}",
        prelude='WANT = (AGENT.parent / "shared" / "expected.txt").read_text().strip()',
    )
    project.write_agent(answer="6")
    first = project.eval_json()
    assert statuses(first) == ["passed", "passed"]
    bundled = bundle_files(sqlite_backend, project_bundle(sqlite_backend, first["batch"]))
    assert bundled["shared/expected.txt"] == b"6\n"
    assert "evals/sums.eval.py" in bundled

    expected.unlink()
    report = rerun(sqlite_backend, first["batch"], tmp_path / "elsewhere", forget_unpacked=True)

    assert outcomes(report) == [(1, "passed", ""), (1, "passed", "")]


def test_a_local_repository_runs_at_the_commit_it_resolved_to_after_it_is_deleted(
    sqlite_backend: Backend, tmp_path: Path, git_available
):
    repository = tmp_path / "calc"
    repository.mkdir()
    git(repository, "init", "--quiet", "--initial-branch=main")
    (repository / "VERSION").write_text("one\n")
    git(repository, "add", "VERSION")
    git(repository, "commit", "--quiet", "-m", "one")
    resolved = git(repository, "rev-parse", "HEAD")
    project = Project(sqlite_backend, tmp_path / "project")
    project.write(
        prelude=textwrap.dedent(
            f"""
            from proctor import repo

            CALC = repo({str(repository)!r})


            def on_version_one(ctx):
                version = ctx.read_text("VERSION").strip()
                return {{"passed": version == "one", "message": f"VERSION is {{version}}"}}
            """
        ),
        validate="[wrote_the_answer, on_version_one]",
        case_fields=", source=CALC",
    )
    project.write_agent(answer="6")
    first = project.eval_json()
    assert statuses(first) == ["passed", "passed"], first

    (repository / "VERSION").write_text("two\n")
    git(repository, "commit", "--quiet", "-am", "two")
    shutil.rmtree(repository)
    report = rerun(sqlite_backend, first["batch"], tmp_path / "elsewhere", forget_unpacked=True)

    assert outcomes(report) == [(1, "passed", ""), (1, "passed", "")]
    (run,) = report["runs"]
    assert {c["message"] for t in run["trials"] for c in t["checks"]} >= {"VERSION is one"}
    ((spec,),) = sqlite_backend.rows(
        "SELECT spec FROM evals_app_run WHERE batch_id = ?", report["batch"]
    )
    assert sqlite_backend.json_value(spec)["code"]["source"]["commit"] == resolved


# --- what goes into a bundle -----------------------------------------------------------------


def test_bundles_are_bounded_leave_dependencies_out_and_are_stored_once(
    sqlite_backend: Backend, tmp_path: Path
):
    project = Project(sqlite_backend, tmp_path / "project")
    project.write()
    project.write_agent()
    (project.evals / "node_modules" / "left-pad").mkdir(parents=True)
    (project.evals / "node_modules" / "left-pad" / "index.js").write_text("module.exports = 1\n")
    (project.evals / ".venv" / "lib").mkdir(parents=True)
    (project.evals / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (project.evals / ".venv" / "lib" / "site.py").write_text("x = 1\n")
    (project.evals / "fixtures").mkdir()
    (project.evals / "fixtures" / "input.txt").write_text("1 + 5\n")

    first = project.eval_json()
    assert statuses(first) == ["passed", "passed"]
    bundled = bundle_files(sqlite_backend, project_bundle(sqlite_backend, first["batch"]))
    assert sorted(bundled) == ["evals/fixtures/input.txt", "evals/sums.eval.py"]
    stored = sqlite_backend.rows("SELECT digest, kind FROM evals_app_bundle ORDER BY digest")
    assert len(stored) == 2, "the eval's bundle and the agent's folder"

    # Unchanged files: a new batch, no new bundle.
    second = project.eval_json()
    assert second["batch"] != first["batch"]
    assert (
        sqlite_backend.rows("SELECT digest, kind FROM evals_app_bundle ORDER BY digest") == stored
    )

    big = project.evals / "data" / "big.bin"
    big.parent.mkdir()
    big.write_bytes(bytes(range(256)) * 80)  # 20 KB, over a 0.01 MB limit
    counts = sqlite_backend.counts()
    refused = project.eval(PROCTOR_BUNDLE_MAX_MB="0.01")

    assert refused.returncode == 2, refused.stderr
    assert refused.stdout == ""
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert "evals/sums.eval.py" in lines[0] and "evals/data/big.bin" in lines[0]
    assert "PROCTOR_BUNDLE_MAX_MB" in lines[0]
    assert sqlite_backend.counts() == counts, "nothing was written"

    (project.root / ".proctorignore").write_text("# too big to ship\nbig.bin\n")
    allowed = project.eval(PROCTOR_BUNDLE_MAX_MB="0.01")

    assert allowed.returncode == 0, allowed.stderr
    third = json.loads(allowed.stdout)
    assert statuses(third) == ["passed", "passed"]
    assert "evals/data/big.bin" not in bundle_files(
        sqlite_backend, project_bundle(sqlite_backend, third["batch"])
    )


def test_files_an_eval_only_lists_at_import_travel_with_it(sqlite_backend: Backend, tmp_path: Path):
    project = Project(sqlite_backend, tmp_path / "project")
    listed = project.root / "cases"
    listed.mkdir()
    (listed / "6.txt").write_text("")  # never opened: its name alone is the answer
    project.write(
        want="{NAMES[0]}",
        prelude='NAMES = sorted(p.stem for p in (AGENT.parent / "cases").glob("*.txt"))',
    )
    project.write_agent(answer="6")
    (project.root / "unrelated.txt").write_text("not listed, not read\n")
    first = project.eval_json()
    assert statuses(first) == ["passed", "passed"]
    bundled = bundle_files(sqlite_backend, project_bundle(sqlite_backend, first["batch"]))
    assert "cases/6.txt" in bundled
    assert "unrelated.txt" not in bundled  # a listing by the import system is not the eval's

    shutil.rmtree(listed)
    report = rerun(sqlite_backend, first["batch"], tmp_path / "elsewhere", forget_unpacked=True)

    assert outcomes(report) == [(1, "passed", ""), (1, "passed", "")]
