"""The pool that hands `proctor eval -j N`'s trials to its forked workers
(runner.jobs.trial_processes.WorkerPool): results and errors come back to each trial's future,
work not handed out yet can be cancelled, and a worker that dies breaks the pool as Python's
own process pool does."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import BrokenExecutor, wait
from pathlib import Path

import pytest

from runner.jobs.trial_processes import start_workers

PIDS = Path(os.environ.get("PROCTOR_HOME", "/tmp")) / "worker-pool-pids"


def refuse_odd(trial_id: int) -> None:
    if trial_id % 2:
        raise ValueError(f"trial {trial_id} is odd")


def note_pid_and_sleep(trial_id: int) -> None:
    PIDS.mkdir(parents=True, exist_ok=True)
    (PIDS / str(trial_id)).write_text(str(os.getpid()))
    time.sleep(0.3 if trial_id else 30)


def sleep_a_little(trial_id: int) -> None:
    time.sleep(0.2)


@pytest.fixture(autouse=True)
def _no_pids_left():
    for path in PIDS.glob("*"):
        path.unlink()
    yield


def test_each_trial_gets_its_result_or_its_error():
    pool = start_workers(2, refuse_odd)
    assert pool is not None
    try:
        futures = {n: pool.submit(refuse_odd, n) for n in range(10)}
        wait(futures.values(), timeout=30)
    finally:
        pool.shutdown(wait=True)

    for n, future in futures.items():
        if n % 2:
            assert f"ValueError: trial {n} is odd" in str(future.exception())
        else:
            assert future.result() is None
    with pytest.raises(TypeError):
        pool.submit(print, 1)


def test_trials_not_handed_out_yet_are_cancelled_on_request():
    pool = start_workers(1, sleep_a_little)
    assert pool is not None
    futures = [pool.submit(sleep_a_little, n) for n in range(6)]
    time.sleep(0.05)
    pool.shutdown(wait=True, cancel_futures=True)

    assert futures[0].result() is None, "the trial a worker holds runs to its end"
    assert sum(f.cancelled() for f in futures) >= 4
    assert all(f.done() for f in futures)
    with pytest.raises(RuntimeError, match="shutdown"):
        pool.submit(sleep_a_little, 9)


def test_a_worker_that_dies_breaks_the_pool_and_fails_what_was_not_done():
    pool = start_workers(2, note_pid_and_sleep)
    assert pool is not None
    try:
        stuck = pool.submit(note_pid_and_sleep, 0)
        deadline = time.monotonic() + 20
        while not (PIDS / "0").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(int((PIDS / "0").read_text()), signal.SIGKILL)
        wait([stuck], timeout=20)

        assert isinstance(stuck.exception(), BrokenExecutor)
        with pytest.raises(BrokenExecutor):
            pool.submit(note_pid_and_sleep, 1)
    finally:
        pool.shutdown(wait=True)
