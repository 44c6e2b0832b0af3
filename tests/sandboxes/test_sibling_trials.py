"""The board on which `proctor eval`'s worker processes see each other's trials, for the write
audit: real forked processes, as the workers are. A watch counts the sibling trial running when
it began and every one started before it ended, and ends up with their secrets."""

from __future__ import annotations

import multiprocessing

from runner.sandboxes.sibling_trials import SiblingBoard

FORK = multiprocessing.get_context("fork")


def _sibling(board: SiblingBoard, go, step) -> None:
    """Runs one trial across the watch's start, then two more, one step at a time."""
    board.join()
    board.trial_started()
    board.publish(["first-secret"])
    step.set()
    go.wait(10)
    board.trial_ended(["first-secret"])
    for secret in ("second-secret", "third-secret"):
        board.trial_started()
        board.publish([secret])
        board.trial_ended([secret])
    step.set()


def test_a_watch_counts_the_sibling_trials_that_ran_beside_it_and_reads_their_secrets() -> None:
    board = SiblingBoard(2)
    go, step = FORK.Event(), FORK.Event()
    sibling = FORK.Process(target=_sibling, args=(board, go, step))
    sibling.start()
    try:
        board.join()
        assert step.wait(10)
        step.clear()
        begun = board.begin_watch()
        assert board.seen_since(begun) == 1, "the trial running as the watch began"
        go.set()
        assert step.wait(10)
        assert board.seen_since(begun) == 3, "and the two it started meanwhile"
        assert sorted(board.secrets()) == ["first-secret", "second-secret", "third-secret"]
        # A watch begun after they all ended sees none of them.
        assert board.seen_since(board.begin_watch()) == 0
    finally:
        sibling.join(10)
        board.close()
    assert sibling.exitcode == 0


def test_a_worker_does_not_count_its_own_trials() -> None:
    board = SiblingBoard(2)
    try:
        board.join()
        begun = board.begin_watch()
        board.trial_started()
        board.trial_ended(["own-secret"])
        assert board.seen_since(begun) == 0
    finally:
        board.close()
