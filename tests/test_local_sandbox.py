"""The local sandbox: fresh folders, a clean environment, closed stdin, and no process that
outlives its step."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ceilings import eventually, finishes
from process_state import running

from proctor import variant
from runner.sandboxes import PathEscapesWorkspace, create_sandbox, trial_folders


@pytest.fixture
def sandbox():
    box = create_sandbox(variant("command", sandbox="local"))
    yield box
    box.destroy()


def _ends_soon(pid: int) -> bool:
    """Whether the process is gone (killing a tree takes the kernel a moment), awaited under a
    ceiling that only guards against hanging."""
    return eventually(lambda: not running(pid))


def test_it_runs_in_the_workspace_with_its_own_home(sandbox) -> None:
    result = sandbox.run(["bash", "-c", 'pwd; echo "$HOME"'])
    assert result.exit_code == 0
    cwd, home = result.stdout.split()
    assert cwd == sandbox.workspace
    assert home == sandbox.home


def test_it_closes_stdin(sandbox) -> None:
    result = sandbox.run(["bash", "-c", "cat; echo after-cat"], timeout_s=5)
    assert result.stdout.strip() == "after-cat"
    assert not result.timed_out


def test_it_does_not_leak_the_workers_environment(sandbox, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-reach-agents")
    result = sandbox.run(
        ["bash", "-c", 'echo "key=${OPENAI_API_KEY:-unset}"'], env={"GIVEN": "yes"}
    )
    assert result.stdout.strip() == "key=unset"
    given = sandbox.run(["bash", "-c", 'echo "$GIVEN"'], env={"GIVEN": "yes"})
    assert given.stdout.strip() == "yes"


def test_it_streams_lines_as_they_come(sandbox) -> None:
    seen = []
    sandbox.run(
        ["bash", "-c", "echo one; echo two >&2; echo three"],
        on_line=lambda s, line: seen.append((s, line)),
    )
    assert ("stdout", "one") in seen and ("stdout", "three") in seen and ("stderr", "two") in seen


def test_a_timeout_kills_the_whole_process_group(sandbox) -> None:
    pid_file = Path(sandbox.workspace) / "child.pid"
    result = finishes(
        lambda: sandbox.run(
            ["bash", "-c", f"sleep 3600 & echo $! > {pid_file}; sleep 3600"], timeout_s=1
        ),
        what="a run past its timeout",
    )
    assert result.timed_out
    assert result.exit_code is None
    child = int(pid_file.read_text())
    assert _ends_soon(child)


def test_a_background_child_does_not_outlive_a_normal_exit(sandbox) -> None:
    pid_file = Path(sandbox.workspace) / "server.pid"
    result = sandbox.run(
        ["bash", "-c", f"(sleep 300 & echo $! > {pid_file}); echo started"], timeout_s=10
    )
    assert result.exit_code == 0 and not result.timed_out
    child = int(pid_file.read_text())
    assert _ends_soon(child)


def test_a_sink_that_raises_still_ends_the_run_and_its_children(sandbox) -> None:
    pid_file = Path(sandbox.workspace) / "child.pid"

    def refuse(_stream: str, _line: str) -> None:
        raise RuntimeError("the sink broke")

    with pytest.raises(RuntimeError, match="the sink broke"):
        finishes(
            lambda: sandbox.run(
                ["bash", "-c", f"sleep 3600 & echo $! > {pid_file}; echo hello; sleep 3600"],
                timeout_s=3600,
                on_line=refuse,
            ),
            what="a run whose sink raised",
        )
    child = int(pid_file.read_text())
    assert _ends_soon(child)


def test_files_stay_inside_the_workspace(sandbox) -> None:
    sandbox.write_text("src/a.txt", "hello")
    assert sandbox.read_text("src/a.txt") == "hello"
    assert sandbox.exists(f"{sandbox.workspace}/src/a.txt")
    with pytest.raises(PathEscapesWorkspace):
        sandbox.read_text("../home/secret")
    with pytest.raises(PathEscapesWorkspace):
        sandbox.read_text("/etc/passwd")
    os.symlink("/etc", Path(sandbox.workspace) / "etc-link")
    with pytest.raises(PathEscapesWorkspace):
        sandbox.read_text("etc-link/passwd")
    assert not sandbox.exists("../../etc/passwd")


def test_a_missing_program_is_an_exit_code_not_a_crash(sandbox) -> None:
    result = sandbox.run(["definitely-not-a-program-xyz"])
    assert result.exit_code == 127
    assert "could not start" in result.stderr


def test_destroy_removes_everything(sandbox) -> None:
    root = Path(sandbox.workspace).parent
    sandbox.write_text("a.txt", "x")
    sandbox.destroy()
    assert not root.exists()
    sandbox.destroy()  # twice is fine


def _next_sandbox_after(box):
    """Hand ``box`` back, wait until its folder is emptied (or deleted), and make the next."""
    box.destroy()
    trial_folders.wait_for_removals()
    return create_sandbox(variant("command", sandbox="local"))


def test_a_handed_back_folder_is_used_again_only_once_empty(sandbox, tmp_path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not the trial's")
    root = Path(sandbox.workspace).parent
    first_inode = root.stat().st_ino
    sandbox.run(
        [
            "bash",
            "-c",
            'mkdir -p src/deep && echo x > src/deep/a.txt && echo y > "$HOME/.config" && '
            f'mkdir "$HOME/cache" && ln -s {outside} link && ln -s {tmp_path} "$TMPDIR/dir-link" '
            '&& echo z > "$TMPDIR/scratch"',
        ]
    )
    following = _next_sandbox_after(sandbox)
    try:
        new_root = Path(following.workspace).parent
        assert not root.exists()  # gone under the old trial's name
        assert new_root.stat().st_ino == first_inode  # the same folder, used again
        for folder in (following.workspace, following.home, str(following.tmp)):
            assert os.listdir(folder) == []
        # Links were removed, never followed.
        assert outside.read_text() == "not the trial's"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["outside.txt"]
    finally:
        following.destroy()


def test_a_folder_left_changed_is_deleted_not_used_again(sandbox, tmp_path) -> None:
    root = Path(sandbox.workspace).parent
    first_inode = root.stat().st_ino
    # A link where the home was, and a workspace made world-writable.
    sandbox.run(["bash", "-c", f'rm -rf "$HOME" && ln -s {tmp_path} "$HOME" && chmod 777 "$PWD"'])
    following = _next_sandbox_after(sandbox)
    try:
        assert not root.exists()
        assert Path(following.workspace).parent.stat().st_ino != first_inode
        assert not list(Path(root.parent).glob(f"{root.name}*"))  # deleted, not kept
        assert tmp_path.exists()  # the link's target is untouched
        assert os.listdir(following.home) == []
    finally:
        following.destroy()


def test_a_process_deletes_the_folders_it_kept_before_it_exits(tmp_path) -> None:
    import subprocess
    import sys

    script = (
        "from proctor import variant\n"
        "from runner.sandboxes import create_sandbox, trial_folders\n"
        "boxes = [create_sandbox(variant('command', sandbox='local')) for _ in range(3)]\n"
        "for box in boxes:\n"
        "    box.run(['bash', '-c', 'echo x > a.txt'])\n"
        "    box.destroy()\n"
        "trial_folders.wait_for_removals()\n"
        "import os\n"
        "kept = [n for n in os.listdir(os.environ['TMPDIR']) if n.startswith('proctor-trial-')]\n"
        "print(len(kept))\n"
    )
    root = Path(__file__).resolve().parent.parent
    result = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(root)},
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.split()[-1]) >= 1  # kept for reuse while the process lived
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("proctor-trial-")] == []
