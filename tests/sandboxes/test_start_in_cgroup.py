"""A run's program starts inside its own cgroup, created there by clone3 (CLONE_INTO_CGROUP) or,
where that cannot be had, moved there by a shell before it execs: either way the program sees
what a plain subprocess would give it (its argv, env and folder, three streams and nothing else,
default signal handling, a session of its own), and a program that cannot start says why.

Every test runs both ways on this machine: ``clone3`` (the C extension built by ``pip
install``) and ``shell`` (the fallback). Machines without a writable cgroup2 mount skip the
tier; CI, which requires every tier, fails instead.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import tier_unavailable

from runner.sandboxes import cgroup_spawn
from runner.sandboxes.containment import containment
from runner.sandboxes.processes import run_process

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "ONLY_THIS": "yes"}


@pytest.fixture(params=["clone3", "shell"])
def way(request, monkeypatch) -> Iterator[str]:
    """Runs start this way for the test (``containment().starts_inside``)."""
    contained = containment()
    if contained.base is None:
        tier_unavailable("cgroups", "this machine has no cgroup2 mount that Proctor may write")
    if request.param == "clone3" and not contained.starts_inside:
        why = (
            "the C extension runner/sandboxes/_clone_into_cgroup.c was not built"
            if not cgroup_spawn.built()
            else "the kernel refused clone3 with CLONE_INTO_CGROUP"
        )
        tier_unavailable("clone3", why)
    monkeypatch.setattr(contained, "starts_inside", request.param == "clone3")
    yield request.param


def _run(argv: list[str], **options):
    options.setdefault("env", ENV)
    return run_process(argv, timeout_s=30, **options)


def test_the_program_is_in_its_runs_cgroup_from_its_first_instruction(way) -> None:
    result = _run(["cat", "/proc/self/cgroup"])

    assert result.exit_code == 0, result.stderr
    unified = next(line for line in result.stdout.splitlines() if line.startswith("0::"))
    base = containment().base
    assert base is not None
    # A cgroup of its own under this Proctor's, not Proctor's own.
    assert unified.rsplit("/", 2)[-2:][0] == base.name, unified
    assert unified.rsplit("/", 1)[-1].startswith("run-"), unified


def test_its_argv_environment_and_folder_are_the_ones_asked_for(way, tmp_path) -> None:
    result = _run(
        ["sh", "-c", 'printf "%s|" "$0" "$1"; pwd; env | sort', "first", "second word"],
        cwd=str(tmp_path),
    )

    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"first|second word|{tmp_path}"
    # Nothing of the worker's environment comes along (sh adds PWD, and dash nothing else).
    assert sorted(
        line for line in lines[1:] if not line.startswith(("PWD=", "OLDPWD=", "SHLVL=", "_="))
    ) == [
        "LANG=C.UTF-8",
        "ONLY_THIS=yes",
        "PATH=/usr/local/bin:/usr/bin:/bin",
    ]


def test_it_gets_its_three_streams_and_no_other_descriptor(way) -> None:
    # An inheritable descriptor of the worker's, which a careless start would pass on. A free
    # number, never a chosen one: dup2 onto a number in use would close what the process had
    # there (a pooled engine connection, by then), under another thread's feet.
    with tempfile.TemporaryFile() as handle:
        leaked = os.dup(handle.fileno())
        os.set_inheritable(leaked, True)
        try:
            result = _run(["ls", "/proc/self/fd"])
        finally:
            os.close(leaked)

    assert result.exit_code == 0, result.stderr
    # 3 is the folder ls itself opened to list.
    assert sorted(int(fd) for fd in result.stdout.split()) == [0, 1, 2, 3]


def test_stdin_is_closed_or_what_was_given(way) -> None:
    assert _run(["cat"]).stdout == ""
    assert _run(["cat"], stdin=b"fed to it\n").stdout == "fed to it\n"


def _signal_masks(status: str) -> dict[str, int]:
    """SigBlk and SigIgn of a /proc status text, as bit masks (bit n-1: signal n)."""
    return {
        line.split(":")[0]: int(line.split()[1], 16)
        for line in status.splitlines()
        if line.startswith(("SigBlk:", "SigIgn:"))
    }


def test_signals_start_as_subprocess_would_leave_them(way) -> None:
    """Handled signals start at their defaults (a handler of the worker's must not run in the
    child), SIGPIPE and SIGXFSZ too (Python ignores SIGPIPE), and the rest is inherited as
    subprocess inherits it: the calling thread's mask, the signals the worker ignores."""
    previous = signal.signal(signal.SIGUSR1, lambda *_: None)
    try:
        ours = _signal_masks(Path("/proc/thread-self/status").read_text())
        status = _run(["cat", "/proc/self/status"])
        piped = _run(["sh", "-c", "yes | head -n 1"])
    finally:
        signal.signal(signal.SIGUSR1, previous)

    restored = (1 << (signal.SIGPIPE - 1)) | (1 << (signal.SIGXFSZ - 1))
    assert ours["SigIgn"] & (1 << (signal.SIGPIPE - 1)), "the test expects Python's SIGPIPE"
    assert _signal_masks(status.stdout) == {
        "SigBlk": ours["SigBlk"],
        "SigIgn": ours["SigIgn"] & ~restored,
    }
    # With SIGPIPE ignored, `yes` would complain of a broken pipe instead of dying quietly.
    assert (piped.stdout, piped.stderr) == ("y\n", "")


def test_it_leads_a_session_of_its_own(way) -> None:
    result = _run(["cat", "/proc/self/stat"])

    fields = result.stdout.rsplit(")", 1)[1].split()
    pid = int(result.stdout.split()[0])
    session = int(fields[3])
    assert session == pid != os.getsid(0)


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["no-such-program-anywhere"], "No such file or directory"),
        (["/no/such/folder/program"], "No such file or directory"),
        (["{not executable}"], "Permission denied"),
        (["/usr/bin"], "Permission denied"),  # a folder
    ],
)
def test_a_program_that_cannot_start_says_why(way, argv, why, tmp_path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("echo it ran\n")
    argv = [str(plain) if arg == "{not executable}" else arg for arg in argv]

    result = _run(argv)

    assert result.exit_code == 127
    assert result.stderr == f"could not start {argv[0]}: {why}\n"


@pytest.mark.parametrize(
    ("argv", "env", "why"),
    [
        (["echo", "a\x00b"], ENV, "embedded null byte"),
        (["true"], {**ENV, "A=B": "1"}, "illegal environment variable name"),
    ],
)
def test_arguments_no_program_could_get_are_said_and_leave_no_cgroup(way, argv, env, why) -> None:
    base = containment().base
    assert base is not None
    before = {p.name for p in base.iterdir() if p.is_dir()}

    result = _run(argv, env=env)

    assert (result.exit_code, result.stderr) == (127, f"could not start {argv[0]}: {why}\n")
    assert {p.name for p in base.iterdir() if p.is_dir()} <= before


def test_a_missing_folder_is_said_as_the_start_failing(way, tmp_path) -> None:
    result = _run(["true"], cwd=str(tmp_path / "gone"))

    assert result.exit_code == 127
    assert result.stderr == "could not start true: No such file or directory\n"


def test_runs_started_from_many_threads_at_once_each_get_their_own(way) -> None:
    """The clone shares this process's memory until the child execs: eight threads starting
    runs together must each get their own program, arguments and output."""
    results: dict[tuple[int, int], tuple[int | None, str]] = {}

    def start_runs(thread: int) -> None:
        for run in range(15):
            result = _run(["sh", "-c", 'echo "$0 $1"; exit "$2"', str(thread), str(run), "3"])
            results[(thread, run)] = (result.exit_code, result.stdout)

    threads = [threading.Thread(target=start_runs, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert results == {(t, r): (3, f"{t} {r}\n") for t in range(8) for r in range(15)}


def test_no_cgroup_is_left_behind_by_many_runs(way) -> None:
    base = containment().base
    assert base is not None
    before = {p.name for p in base.iterdir() if p.is_dir()}

    for _ in range(20):
        assert _run(["true"]).exit_code == 0

    assert {p.name for p in base.iterdir() if p.is_dir()} <= before


def test_the_probe_tells_whether_programs_can_start_inside(monkeypatch, tmp_path) -> None:
    contained = containment()
    if contained.base is None or not cgroup_spawn.built():
        tier_unavailable("clone3", "no writable cgroup2 mount, or the C extension was not built")
    probe = Path(contained.base) / "probe-test"
    probe.mkdir()
    try:
        assert cgroup_spawn.probe(str(probe)) is True
        # Without the extension (no compiler where Proctor was installed): the shell way.
        monkeypatch.setattr(cgroup_spawn, "_clone_into_cgroup", None)
        assert cgroup_spawn.probe(str(probe)) is False
    finally:
        probe.rmdir()
    # A folder that is not a cgroup: the kernel refuses, and the probe says so; so for one
    # that is not there at all.
    monkeypatch.undo()
    assert cgroup_spawn.probe(str(tmp_path)) is False
    assert cgroup_spawn.probe(str(tmp_path / "gone")) is False
