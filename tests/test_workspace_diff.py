"""The workspace diff: what the agent changed after the workspace was prepared."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from runner.workspace import diff as diff_module
from runner.workspace.diff import DEFAULT_IGNORE, LARGE_FILE_BYTES, WorkspaceSnapshot


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    (root / "src" / "calc").mkdir(parents=True)
    (root / "src" / "calc" / "add.py").write_text("def add(a, b):\n    return 0\n")
    (root / "README.md").write_text("# calc\n")
    (root / "notes.txt").write_text("remember the milk\n")
    return root


@pytest.fixture
def snapshot(workspace: Path):
    taken = WorkspaceSnapshot.take(workspace)
    yield taken
    taken.discard()


def test_it_is_empty_when_nothing_changed(workspace, snapshot):
    assert snapshot.diff(workspace) == ""


def test_it_shows_a_modified_file_as_a_unified_diff(workspace, snapshot):
    (workspace / "src" / "calc" / "add.py").write_text("def add(a, b):\n    return a + b\n")

    diff = snapshot.diff(workspace)

    assert diff.startswith("diff --git a/src/calc/add.py b/src/calc/add.py\n")
    assert "--- a/src/calc/add.py\n+++ b/src/calc/add.py\n" in diff
    assert "-    return 0\n+    return a + b\n" in diff
    assert "README.md" not in diff


def test_it_shows_added_files_in_new_folders(workspace, snapshot):
    (workspace / "tests" / "unit").mkdir(parents=True)
    (workspace / "tests" / "unit" / "test_add.py").write_text("assert add(1, 2) == 3\n")

    diff = snapshot.diff(workspace)

    assert "diff --git a/tests/unit/test_add.py b/tests/unit/test_add.py\n" in diff
    assert "new file mode 100644" in diff
    assert "--- /dev/null\n+++ b/tests/unit/test_add.py\n" in diff
    assert "+assert add(1, 2) == 3\n" in diff


def test_it_shows_deleted_files(workspace, snapshot):
    (workspace / "notes.txt").unlink()

    diff = snapshot.diff(workspace)

    assert "diff --git a/notes.txt b/notes.txt\n" in diff
    assert "deleted file mode 100644" in diff
    assert "--- a/notes.txt\n+++ /dev/null\n" in diff
    assert "-remember the milk\n" in diff


def test_it_ignores_the_git_folder_and_excluded_folders(workspace):
    (workspace / ".git").mkdir()
    (workspace / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (workspace / "node_modules" / "left-pad").mkdir(parents=True)
    (workspace / "node_modules" / "left-pad" / "index.js").write_text("module.exports = 1\n")
    with WorkspaceSnapshot.take(workspace, exclude=["node_modules/"]) as snapshot:
        (workspace / ".git" / "HEAD").write_text("ref: refs/heads/agent\n")
        (workspace / "node_modules" / "left-pad" / "index.js").write_text("changed\n")
        (workspace / "node_modules" / "new.js").write_text("new\n")
        (workspace / "README.md").write_text("# calculator\n")

        diff = snapshot.diff(workspace)

    assert "diff --git a/README.md b/README.md\n" in diff
    assert ".git" not in diff
    assert "node_modules" not in diff


def test_it_notes_a_changed_binary_file_without_its_bytes(workspace):
    (workspace / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\x01")
    with WorkspaceSnapshot.take(workspace) as snapshot:
        (workspace / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\x02")

        diff = snapshot.diff(workspace)

    assert "diff --git a/logo.png b/logo.png\n" in diff
    assert "Binary files a/logo.png and b/logo.png differ\n" in diff
    assert "PNG" not in diff.replace("logo.png", "")


def test_it_names_a_large_file_instead_of_diffing_it(workspace):
    (workspace / "data.csv").write_text("a,b\n" * (LARGE_FILE_BYTES // 4 + 1))
    with WorkspaceSnapshot.take(workspace) as snapshot:
        (workspace / "data.csv").write_text("c,d\n" * (LARGE_FILE_BYTES // 4 + 1))

        diff = snapshot.diff(workspace)

    assert diff == "large file changed: data.csv\n"


def test_it_shows_a_mode_change(workspace, snapshot):
    os.chmod(workspace / "notes.txt", 0o755)

    diff = snapshot.diff(workspace)

    assert "diff --git a/notes.txt b/notes.txt\nold mode 100644\nnew mode 100755\n" in diff


def test_it_records_symlinks_without_following_them(tmp_path, workspace):
    outside = tmp_path / "outside-secret.txt"
    outside.write_text("top secret\n")
    (workspace / "link").symlink_to(outside)
    with WorkspaceSnapshot.take(workspace) as snapshot:
        outside.write_text("changed secret\n")
        (workspace / "escape").symlink_to(tmp_path)

        diff = snapshot.diff(workspace)

    assert "secret\n" not in diff.replace(str(outside), "")
    assert "diff --git a/escape b/escape\nnew file mode 120000\n" in diff
    assert f"+{tmp_path}\n" in diff
    assert "a/link" not in diff


def test_it_runs_in_process_and_leaves_no_copy_behind(tmp_path, workspace, monkeypatch):
    temp_root = tmp_path / "temp"
    temp_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp_root))

    def no_processes(*args, **kwargs):
        raise AssertionError(f"the diff started a process: {args}")

    monkeypatch.setattr(subprocess, "run", no_processes)
    monkeypatch.setattr(subprocess, "Popen", no_processes)
    snapshot = WorkspaceSnapshot.take(workspace)
    (workspace / "notes.txt").write_text("remember the eggs\n")

    assert "+remember the eggs\n" in snapshot.diff(workspace)
    assert list(temp_root.iterdir()) == []


def test_discard_ends_the_snapshot(workspace):
    snapshot = WorkspaceSnapshot.take(workspace)

    snapshot.discard()

    with pytest.raises(RuntimeError, match="discarded"):
        snapshot.diff(workspace)


def test_git_applies_the_diff_to_the_original_tree(tmp_path, workspace):
    original = tmp_path / "original"
    shutil.copytree(workspace, original)
    (workspace / "logo.png").write_bytes(b"\x89PNG\x00")
    with WorkspaceSnapshot.take(workspace) as snapshot:
        (workspace / "src" / "calc" / "add.py").write_text("def add(a, b):\n    return a + b")
        (workspace / "notes.txt").unlink()
        (workspace / "docs with space").mkdir()
        (workspace / "docs with space" / "how to.md").write_text("# How\n\nAdd.\n")
        (workspace / "empty.txt").write_text("")
        os.chmod(workspace / "README.md", 0o755)
        diff = snapshot.diff(workspace)
    (original / "logo.png").write_bytes(b"\x89PNG\x00")
    (tmp_path / "change.diff").write_text(diff)

    applied = subprocess.run(
        ["git", "apply", "--verbose", str(tmp_path / "change.diff")],
        cwd=original,
        capture_output=True,
        text=True,
    )

    assert applied.returncode == 0, applied.stderr
    assert (original / "src" / "calc" / "add.py").read_text() == "def add(a, b):\n    return a + b"
    assert not (original / "notes.txt").exists()
    assert (original / "docs with space" / "how to.md").read_text() == "# How\n\nAdd.\n"
    assert (original / "empty.txt").exists()
    assert os.stat(original / "README.md").st_mode & 0o100


def test_generated_files_are_left_out_by_default(workspace):
    with WorkspaceSnapshot.take(workspace) as snapshot:
        (workspace / "src" / "calc" / "__pycache__").mkdir()
        (workspace / "src" / "calc" / "__pycache__" / "add.cpython-311.pyc").write_bytes(b"\0pyc")
        (workspace / "legacy.pyc").write_bytes(b"\0pyc")
        (workspace / ".pytest_cache" / "v").mkdir(parents=True)
        (workspace / ".pytest_cache" / "v" / "lastfailed").write_text("{}\n")
        (workspace / "src" / "calc" / "add.py").write_text("def add(a, b):\n    return a + b\n")

        diff = snapshot.diff(workspace)
        changed, _ = snapshot.changes(workspace)

    assert "diff --git a/src/calc/add.py b/src/calc/add.py\n" in diff
    assert "pycache" not in diff and ".pyc" not in diff and "pytest_cache" not in diff
    assert changed == ["src/calc/add.py"]


def test_an_eval_can_extend_the_ignore_list(workspace):
    with WorkspaceSnapshot.take(workspace, ignore=[*DEFAULT_IGNORE, "build/", "*.log"]) as snapshot:
        (workspace / "build").mkdir()
        (workspace / "build" / "out.js").write_text("compiled\n")
        (workspace / "run.log").write_text("log\n")
        (workspace / "src" / "calc" / "debug.log").write_text("log\n")
        (workspace / "src" / "build.py").write_text("print('kept')\n")
        (workspace / "x.pyc").write_bytes(b"\0")

        changed, _ = snapshot.changes(workspace)

    assert changed == ["src/build.py"]


def test_changes_lists_what_moved_since_the_snapshot_and_chains(workspace):
    first = WorkspaceSnapshot.take(workspace)
    (workspace / "notes.txt").write_text("remember the eggs\n")
    (workspace / "new.txt").write_text("new\n")

    changed, second = first.changes(workspace)
    (workspace / "README.md").unlink()
    (workspace / "new.txt").write_text("newer\n")
    later, _ = second.changes(workspace)

    assert changed == ["new.txt", "notes.txt"]
    assert later == ["README.md", "new.txt"]
    assert "+remember the eggs\n" in first.diff(workspace), "the first snapshot stays usable"


def test_a_same_size_rewrite_in_the_same_instant_is_still_seen(workspace):
    path = workspace / "notes.txt"
    before = os.stat(path)
    with WorkspaceSnapshot.take(workspace) as snapshot:
        path.write_text("remember the silk\n")  # same size
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))

        changed, _ = snapshot.changes(workspace)

    assert changed == ["notes.txt"]


def test_beyond_the_memory_budget_contents_wait_in_a_temp_folder_until_discarded(
    tmp_path, workspace, monkeypatch
):
    temp_root = tmp_path / "temp"
    temp_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp_root))
    monkeypatch.setattr(diff_module, "MEMORY_BUDGET_BYTES", 10)
    snapshot = WorkspaceSnapshot.take(workspace)
    (workspace / "src" / "calc" / "add.py").write_text("def add(a, b):\n    return a + b\n")
    _, later = snapshot.changes(workspace)

    diff = snapshot.diff(workspace)
    assert "-    return 0\n+    return a + b\n" in diff
    assert len(list(temp_root.iterdir())) == 1
    snapshot.discard()

    assert list(temp_root.iterdir()) == []
