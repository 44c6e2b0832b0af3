"""Which generated files the workspace diff leaves out: the default list and a suite's
``diff_ignore`` read as the lines of a ``.gitignore``. Each rule is seen in the diff text a
trial stores, on a workspace where the rule makes a difference."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.workspace.diff import DEFAULT_IGNORE, WorkspaceSnapshot


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "README.md").write_text("# app\n")
    return root


def write(root: Path, rel: str, text: str = "made by the agent\n") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def diff_after(workspace: Path, ignore: list[str], *writes: str) -> str:
    """The diff of a trial whose agent wrote ``writes``, under the default list plus
    ``ignore``."""
    with WorkspaceSnapshot.take(workspace, ignore=[*DEFAULT_IGNORE, *ignore]) as snapshot:
        for rel in writes:
            write(workspace, rel)
        return snapshot.diff(workspace)


def shown(diff: str) -> list[str]:
    """The paths the diff names, in order."""
    return [line.split(" b/", 1)[1] for line in diff.splitlines() if line.startswith("diff --git")]


def test_a_star_stops_at_a_slash(workspace):
    diff = diff_after(workspace, ["dist/*.js"], "dist/app.js", "dist/vendor/lib.js")

    # The bundle inside dist/vendor is not matched by dist/*.js (it was, when * crossed "/").
    assert shown(diff) == ["dist/vendor/lib.js"]


def test_a_double_star_crosses_folders(workspace):
    diff = diff_after(
        workspace, ["dist/**/*.js"], "dist/app.js", "dist/vendor/lib.js", "dist/vendor/NOTES.md"
    )

    assert shown(diff) == ["dist/vendor/NOTES.md"]


def test_a_trailing_slash_matches_folders_only(workspace):
    diff = diff_after(workspace, ["build/"], "build/out.js", "scripts/build", "web/build/app.js")

    # scripts/build is a file the agent wrote: it shows (it did not, when the "/" was dropped).
    assert shown(diff) == ["scripts/build"]


def test_an_exclamation_mark_includes_a_path_again(workspace):
    diff = diff_after(workspace, ["*.log", "!expected.log"], "run.log", "tests/expected.log")

    assert shown(diff) == ["tests/expected.log"]


def test_a_file_inside_a_left_out_folder_stays_out_as_in_git(workspace):
    diff = diff_after(workspace, ["build/", "!build/keep.txt"], "build/keep.txt", "app.py")

    assert shown(diff) == ["app.py"]


def test_a_file_among_left_out_files_can_be_included_again(workspace):
    diff = diff_after(workspace, ["build/*", "!build/keep.txt"], "build/keep.txt", "build/out.js")

    assert shown(diff) == ["build/keep.txt"]


def test_a_pattern_without_a_slash_matches_at_any_depth(workspace):
    diff = diff_after(
        workspace,
        ["*.log", "generated"],
        "debug.log",
        "src/deep/er/trace.log",
        "src/generated/models.py",
        "src/models.py",
    )

    assert shown(diff) == ["src/models.py"]


def test_a_pattern_with_a_slash_matches_from_the_root(workspace):
    diff = diff_after(workspace, ["/todo.txt", "web/out"], "todo.txt", "docs/todo.txt", "x/web/out")

    assert shown(diff) == ["docs/todo.txt", "x/web/out"]


def test_the_defaults_still_leave_out_generated_files(workspace):
    diff = diff_after(
        workspace,
        [],
        "src/__pycache__/calc.cpython-311.pyc",
        "legacy.pyc",
        ".pytest_cache/v/lastfailed",
        "native/calc.o",
        "src/calc.py",
    )

    assert shown(diff) == ["src/calc.py"]


def test_a_turns_changes_leave_out_the_same_paths(workspace):
    with WorkspaceSnapshot.take(workspace, ignore=[*DEFAULT_IGNORE, "dist/*.js"]) as snapshot:
        write(workspace, "dist/app.js")
        write(workspace, "dist/vendor/lib.js")
        changed, _ = snapshot.changes(workspace)

    assert changed == ["dist/vendor/lib.js"]
