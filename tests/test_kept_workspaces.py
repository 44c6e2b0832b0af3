"""A trial's final workspace, kept content-addressed and put back for a re-grade
(runner.workspace.kept): identical files are stored once across trials, modes and links come
back, and what cannot come back says so in one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evals_app.resolution import resolve_case
from proctor import case, command, profile, suite, variant
from runner.core.reporting import MemoryRecorder
from runner.trial.execute import TrialPlan
from runner.trial.regrade import StoredTrial, regrade_trial
from runner.workspace.diff import WorkspaceSnapshot
from runner.workspace.kept import (
    NotRestorable,
    WorkspaceStore,
    keep_workspace,
    restore_workspace,
    wait_until_written,
)


def workspace(folder: Path, answer: str) -> Path:
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "lib.py").write_text("VALUE = 1\n")
    (folder / "answer.txt").write_text(answer)
    (folder / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (folder / "run.sh").chmod(0o755)
    os.symlink("src/lib.py", folder / "lib-link.py")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "x.pyc").write_bytes(b"\0")
    return folder


def kept(store: WorkspaceStore, folder: Path) -> dict:
    with WorkspaceSnapshot.take(folder) as snapshot:
        record = keep_workspace(store, snapshot.files(), folder)
    wait_until_written()
    return record


def test_two_trials_share_the_files_they_both_left(tmp_path: Path) -> None:
    store = WorkspaceStore(tmp_path / "store", max_bytes=1024 * 1024)
    first = kept(store, workspace(tmp_path / "a", "four\n"))
    second = kept(store, workspace(tmp_path / "b", "five\n"))

    assert first["files"] == second["files"] == 4  # byte code is not the agent's work
    assert first["manifest"] != second["manifest"]
    # lib.py, run.sh, two answers and two manifests: six blobs for two trials of four files.
    assert len(list((tmp_path / "store").glob("*/*.gz"))) == 6
    assert kept(store, workspace(tmp_path / "c", "four\n"))["manifest"] == first["manifest"]


def test_a_kept_workspace_comes_back_with_its_modes_and_links(tmp_path: Path) -> None:
    store = WorkspaceStore(tmp_path / "store", max_bytes=1024 * 1024)
    record = kept(store, workspace(tmp_path / "a", "four\n"))
    target = tmp_path / "back"
    target.mkdir()

    assert restore_workspace(store, record, target) == 4
    assert (target / "answer.txt").read_text() == "four\n"
    assert os.access(target / "run.sh", os.X_OK)
    assert os.readlink(target / "lib-link.py") == "src/lib.py"
    assert not (target / "__pycache__").exists()


def test_what_cannot_come_back_says_so_in_one_line(tmp_path: Path) -> None:
    small = WorkspaceStore(tmp_path / "store", max_bytes=8)
    record = kept(small, workspace(tmp_path / "a", "four\n"))
    assert record["not_kept"].startswith("over 0.0 MB (")
    with pytest.raises(NotRestorable, match=r"^workspace not kept: over 0\.0 MB \("):
        restore_workspace(small, record, tmp_path)
    with pytest.raises(NotRestorable, match="ran before Proctor kept workspaces"):
        restore_workspace(small, None, tmp_path)
    with pytest.raises(NotRestorable, match=r"manifest abcdefabcdef is not in"):
        restore_workspace(small, {"manifest": "abcdef" * 10}, tmp_path)


# --- a re-graded trial, without the database --------------------------------------------------


def regraded(tmp_path: Path, the_case, sandbox: str, **stored_fields):
    """Re-grade a trial of ``the_case`` that left ``workspace()``'s files."""

    the_variant = variant("command", profile=profile("p", run="true"), sandbox=sandbox)
    the_suite = suite("s", prompt="p", cases=[the_case], variants=[the_variant])
    store = WorkspaceStore(tmp_path / "store", max_bytes=1024 * 1024)
    plan = TrialPlan(
        resolved=resolve_case(the_suite, the_case, Path(__file__)),
        variant=the_variant,
        index=0,
        cache_root=tmp_path / "cache",
        git_host="https://git.invalid",
        workspace_store=store,
    )
    stored = StoredTrial(
        trial_id=11,
        batch_id=7,
        turns=[],
        conversation={"workspace": kept(store, workspace(tmp_path / "ws", "four\n"))},
        mock_calls={},
        duration_ms=5,
        **stored_fields,
    )
    recorder = MemoryRecorder()
    return regrade_trial(plan, stored, recorder), recorder


def test_a_timed_out_trial_stays_timed_out_and_runs_no_check(tmp_path: Path) -> None:
    outcome, recorder = regraded(
        tmp_path, case("c", validate=command("true")), "local", status="timed_out"
    )
    assert outcome.status == "timed_out"
    assert recorder.checks == []


def test_a_command_check_of_a_docker_trial_says_it_needs_the_image(tmp_path: Path) -> None:
    outcome, recorder = regraded(
        tmp_path, case("c", validate=command("test -f answer.txt")), "docker", status="passed"
    )
    assert outcome.status == "errored" and recorder.checks == []
    assert outcome.error == (
        "check test -f answer.txt is a command, which needs the docker sandbox's image the trial "
        "ran in; a re-grade does not start it, so rerun the trial instead"
    )


def test_a_command_check_of_a_local_trial_runs_in_the_restored_workspace(tmp_path: Path) -> None:
    outcome, recorder = regraded(
        tmp_path, case("c", validate=command("grep -q four answer.txt && ./run.sh")), "local"
    )
    assert outcome.status == "passed", [c.message for c in recorder.checks]
