"""What the publisher sends of a chunk that piled up: each trial's newest event seq and its last
status, in the order they came, so a page re-reads the trial once and sees where it ended."""

from __future__ import annotations

from runner.jobs.publishing import thinned


def changed(trial_id: int, status: str) -> tuple[int, dict]:
    return 1, {"type": "trial.changed", "trial_id": trial_id, "batch_id": 1, "status": status}


def event(trial_id: int, seq: int) -> tuple[int, dict]:
    return 1, {"type": "trial.event", "trial_id": trial_id, "batch_id": 1, "seq": seq}


def test_a_trial_that_started_and_ended_in_one_chunk_is_sent_as_ended():
    chunk = [changed(1, "running"), event(1, 0), changed(2, "running"), changed(1, "passed")]

    assert thinned(chunk) == [event(1, 0), changed(2, "running"), changed(1, "passed")]


def test_only_the_newest_event_of_each_trial_is_sent_and_batch_news_is_kept():
    batch_done = (1, {"type": "batch.changed", "batch_id": 1, "status": "finished"})
    chunk = [event(1, 0), event(2, 0), event(1, 1), batch_done, event(1, 2)]

    assert thinned(chunk) == [event(2, 0), batch_done, event(1, 2)]
