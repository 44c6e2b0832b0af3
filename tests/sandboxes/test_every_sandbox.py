"""What every sandbox kind promises a trial, checked on local, bwrap and docker alike: processes
run in the workspace with their own home, stdin closed, a clean environment, output streamed,
nothing left running after a step, files kept inside the workspace, everything gone after
destroy."""

from __future__ import annotations

import fcntl
import time
from pathlib import Path

import pytest
from ceilings import HANG_CEILING_S

from runner.sandboxes import PathEscapesWorkspace

# A child that holds a lock on `lock` (and says so in `ready`) for as long as it lives: the host
# can take the lock only once every process holding it is gone, whatever pid namespace it ran in.
LOCK_HOLDER = 'flock lock bash -c "echo held > ready; sleep 300"'
WAIT_UNTIL_HELD = "while [ ! -e ready ]; do sleep 0.05; done"


def lock_released(path: Path, within_s: float = HANG_CEILING_S) -> bool:
    deadline = time.monotonic() + within_s
    with open(path, "rb") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.05)


def test_it_runs_in_the_workspace_with_its_own_home(sandbox) -> None:
    result = sandbox.run(
        ["bash", "-c", 'pwd; echo "$HOME"; echo made > made.txt; echo kept > "$HOME/notes"']
    )
    assert result.exit_code == 0, result.output
    cwd, home = result.stdout.split()
    assert cwd == sandbox.workspace
    assert home == sandbox.home
    assert sandbox.read_text("made.txt") == "made\n"
    assert (sandbox.host_home / "notes").read_text() == "kept\n"


def test_it_reports_the_exit_code(sandbox) -> None:
    assert sandbox.run(["bash", "-c", "exit 3"]).exit_code == 3


def test_it_closes_stdin(sandbox) -> None:
    result = sandbox.run(["bash", "-c", "cat; echo after-cat"], timeout_s=10)
    assert result.stdout.strip() == "after-cat"
    assert not result.timed_out


def test_it_does_not_leak_the_workers_environment(sandbox, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-reach-agents")
    result = sandbox.run(
        ["bash", "-c", 'echo "key=${OPENAI_API_KEY:-unset} given=$GIVEN"'], env={"GIVEN": "yes"}
    )
    assert result.stdout.strip() == "key=unset given=yes"


def test_it_streams_lines_as_they_come(sandbox) -> None:
    seen = []
    result = sandbox.run(
        ["bash", "-c", "echo one; echo two >&2; printf 'three\\nfour'"],
        on_line=lambda stream, line: seen.append((stream, line)),
    )
    assert [line for line in seen if line[0] == "stdout"] == [
        ("stdout", "one"),
        ("stdout", "three"),
        ("stdout", "four"),
    ]
    assert ("stderr", "two") in seen
    assert result.stdout == "one\nthree\nfour"


def test_a_timeout_kills_the_whole_process_tree(sandbox) -> None:
    result = sandbox.run(
        ["bash", "-c", f"{LOCK_HOLDER} & {WAIT_UNTIL_HELD}; sleep 300"], timeout_s=3
    )
    assert result.timed_out
    assert result.exit_code is None
    assert sandbox.exists("ready"), "the child never held its lock"
    assert lock_released(sandbox.host_workspace / "lock")


def test_a_background_child_does_not_outlive_a_normal_exit(sandbox) -> None:
    result = sandbox.run(
        ["bash", "-c", f"({LOCK_HOLDER} &); {WAIT_UNTIL_HELD}; echo started"], timeout_s=30
    )
    assert result.exit_code == 0 and not result.timed_out
    assert result.stdout.strip() == "started"
    assert lock_released(sandbox.host_workspace / "lock")


def test_the_runner_kit_is_importable_by_python3(sandbox) -> None:
    result = sandbox.run(
        [
            "python3",
            "-c",
            "from proctor.runner import create_emitter; create_emitter().started('s1')",
        ]
    )
    assert result.exit_code == 0, result.output
    assert '"_tag": "Started"' in result.stdout or '"_tag":"Started"' in result.stdout


def test_files_stay_inside_the_workspace(sandbox) -> None:
    sandbox.write_text("src/a.txt", "hello")
    assert sandbox.read_text("src/a.txt") == "hello"
    assert sandbox.exists(f"{sandbox.workspace}/src/a.txt")
    assert sandbox.run(["cat", "src/a.txt"]).stdout == "hello"
    with pytest.raises(PathEscapesWorkspace):
        sandbox.read_text("../home/secret")
    with pytest.raises(PathEscapesWorkspace):
        sandbox.read_text("/etc/passwd")
    sandbox.run(["ln", "-s", "/etc", "etc-link"])
    with pytest.raises(PathEscapesWorkspace):
        sandbox.read_text("etc-link/passwd")
    assert not sandbox.exists("../../etc/passwd")


def test_a_missing_program_is_an_exit_code_not_a_crash(sandbox) -> None:
    result = sandbox.run(["definitely-not-a-program-xyz"])
    assert result.exit_code == 127
    assert "could not start definitely-not-a-program-xyz" in result.stderr


def test_destroy_removes_every_folder(sandbox) -> None:
    sandbox.run(["bash", "-c", 'echo x > a.txt; echo y > "$HOME/b"; echo z > "$TMPDIR/c"'])
    folders = [sandbox.host_workspace, sandbox.host_home, sandbox.host_workspace.parent]
    sandbox.destroy()
    assert not any(folder.exists() for folder in folders)
    sandbox.destroy()  # twice is fine
