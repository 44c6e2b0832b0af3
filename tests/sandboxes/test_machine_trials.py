"""The machine's board of trials, as the write audit reads it: real forked processes stand for
unrelated Proctor processes. A watch counts every other process's trial that ran at some moment
of it, one of a process that came and went meanwhile, or that was killed, included; a trial
that ended before it began, or a process dead before it began, does not count. Logs go once no
watch can need them."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest
from ceilings import eventually

from runner.sandboxes import machine_trials as board_module
from runner.sandboxes.machine_trials import MachineTrials, machine_trials

FORK = multiprocessing.get_context("fork")


@pytest.fixture(autouse=True)
def own_board(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "board"
    monkeypatch.setenv(board_module.FOLDER_ENV, str(folder))
    return folder


def _trials(count: int, started, go=None) -> None:
    """Runs ``count`` trials one after the other; with ``go``, the first stays running until
    it is set."""
    for n in range(count):
        number = machine_trials.trial_started()
        if n == 0:
            started.set()
            if go is not None:
                go.wait(60)
        machine_trials.trial_ended(number)


def _run(target, *args) -> multiprocessing.process.BaseProcess:
    process = FORK.Process(target=target, args=args)
    process.start()
    return process


def _seen(begun: int) -> dict[str, int]:
    return machine_trials.seen_between(begun, time.monotonic_ns())


def test_a_process_that_came_and_went_during_the_watch_counts() -> None:
    begun = time.monotonic_ns()
    started = FORK.Event()
    short = _run(_trials, 3, started)
    short.join(60)
    assert short.exitcode == 0
    assert list(_seen(begun).values()) == [3], "its three trials, though it is gone"
    assert _seen(time.monotonic_ns()) == {}, "a watch begun after it ended sees none"


def test_a_trial_running_as_the_watch_began_counts_and_one_ended_before_does_not() -> None:
    started, go = FORK.Event(), FORK.Event()
    long = _run(_trials, 1, started, go)
    try:
        assert started.wait(60)
        begun = time.monotonic_ns()
        assert list(_seen(begun).values()) == [1]
    finally:
        go.set()
        long.join(60)
    assert list(_seen(begun).values()) == [1], "it ran during the watch, ended since"
    assert _seen(time.monotonic_ns()) == {}


def test_a_killed_process_counts_for_the_watches_it_ran_beside_and_no_later_ones(
    own_board: Path,
) -> None:
    started, go = FORK.Event(), FORK.Event()
    killed = _run(_trials, 1, started, go)
    assert started.wait(60)
    begun = time.monotonic_ns()
    os.kill(killed.pid, signal.SIGKILL)
    killed.join(60)
    # Its trial never ended in its log; it ran during this watch, killed or not.
    assert list(_seen(begun).values()) == [1]
    assert [path.name for path in own_board.iterdir() if ".ended-" in path.name], (
        "the watch found it dead and noted so"
    )
    assert _seen(time.monotonic_ns()) == {}, "a watch begun after the note does not count it"


def test_a_reused_pid_is_not_the_process_that_had_it(own_board: Path) -> None:
    # A log named after this test's pid with another start time: a process gone, its pid reused.
    own_board.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    stale = own_board / f"{pid}-1.000000.log"
    stale.write_bytes(board_module._RECORD.pack(time.monotonic_ns() - 10**9, 1, 0, 1))
    begun = time.monotonic_ns()
    assert _seen(begun) == {f"{pid}-1": 1}, "counted while it may have been alive"
    assert _seen(time.monotonic_ns()) == {}, "then noted as dead: its pid is another's"


def _trials_in_two_rounds(first: int, second: int, paused, go) -> None:
    for round_, count in enumerate((first, second)):
        if round_:
            paused.set()
            go.wait(60)
        for _ in range(count):
            machine_trials.trial_ended(machine_trials.trial_started())


@pytest.mark.parametrize(
    ("rotate_after", "tail"),
    [(4, 16), (4, 1), (1000, 1)],
    ids=["split-read-at-once", "split-searched", "one-file-searched"],
)
def test_a_long_log_is_read_at_any_moment_of_it(
    monkeypatch: pytest.MonkeyPatch, rotate_after: int, tail: int
) -> None:
    monkeypatch.setattr(board_module, "ROTATE_AFTER", rotate_after)
    monkeypatch.setattr(board_module, "_TAIL_RECORDS", tail)
    paused, go = FORK.Event(), FORK.Event()
    before_all = time.monotonic_ns()
    many = _run(_trials_in_two_rounds, 5, 6, paused, go)
    assert paused.wait(60)
    begun = time.monotonic_ns()
    go.set()
    many.join(60)
    assert many.exitcode == 0
    assert list(_seen(begun).values()) == [6], "the second round's, not the first's"
    assert list(_seen(before_all).values()) == [11], "all its trials"
    assert _seen(time.monotonic_ns()) == {}


def test_a_sweep_keeps_what_a_running_watch_may_need_and_removes_the_rest(
    own_board: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(board_module, "SWEEP_MARGIN_NS", 0)
    started = FORK.Event()
    gone = _run(_trials, 1, started)
    gone.join(60)
    # A live process with a trial running since before: a watch in it may need the dead log.
    watcher = MachineTrials()
    number = watcher.trial_started()
    watcher.sweep()
    assert eventually(lambda: any(".ended-" in p.name for p in own_board.iterdir()))
    assert any(p.name.startswith(f"{gone.pid}-") for p in own_board.iterdir()), "kept"
    watcher.trial_ended(number)
    watcher.sweep()
    left = [p.name for p in own_board.iterdir() if p.name.startswith(f"{gone.pid}-")]
    assert left == [], "no running trial began before it died: nothing needs it"
