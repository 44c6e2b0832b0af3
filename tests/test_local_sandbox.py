"""The local sandbox: fresh folders, a clean environment, closed stdin, and no process that
outlives its step."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from process_state import running

from proctor import variant
from runner.sandboxes import PathEscapesWorkspace, create_sandbox


@pytest.fixture
def sandbox():
    box = create_sandbox(variant("command", sandbox="local"))
    yield box
    box.destroy()


def _ends_soon(pid: int) -> bool:
    """Whether the process is gone within 5 s (killing a tree takes the kernel a moment)."""
    deadline = time.monotonic() + 5
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not running(pid)


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
    started = time.monotonic()
    result = sandbox.run(
        ["bash", "-c", f"sleep 300 & echo $! > {pid_file}; sleep 300"], timeout_s=1
    )
    assert result.timed_out
    assert result.exit_code is None
    assert time.monotonic() - started < 30
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

    started = time.monotonic()
    with pytest.raises(RuntimeError, match="the sink broke"):
        sandbox.run(
            ["bash", "-c", f"sleep 300 & echo $! > {pid_file}; echo hello; sleep 300"],
            timeout_s=60,
            on_line=refuse,
        )
    assert time.monotonic() - started < 30
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
