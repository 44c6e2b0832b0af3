"""Work handed off the trial's path (container and folder removals, kept workspaces): a fault
in one item is said and the rest are still done, so nothing behind it waits for ever."""

from __future__ import annotations

import threading

from runner.sandboxes.off_the_path import OffThePath

# Only guards against a hang: the items take microseconds.
HANG_CEILING_S = 60


def test_an_item_whose_work_raises_is_said_in_one_line_and_the_items_behind_it_are_done(
    caplog,
) -> None:
    both_queued = threading.Event()
    done: list[str] = []

    def work(item: str) -> None:
        if item == "broken":
            both_queued.wait(HANG_CEILING_S)  # the next item is queued behind this one
            raise OSError(9, "Bad file descriptor")
        done.append(item)

    removals = OffThePath("test-remover", work)
    with caplog.at_level("ERROR", logger="runner.sandboxes.off_the_path"):
        removals.put("broken")
        removals.put("sound")
        both_queued.set()
        joined = threading.Thread(target=removals.join, daemon=True)
        joined.start()
        joined.join(HANG_CEILING_S)

    assert not joined.is_alive(), "join waited for an item nothing will ever do"
    assert done == ["sound"]
    (said,) = [record.getMessage() for record in caplog.records]
    assert said == "test-remover could not finish 'broken': OSError: [Errno 9] Bad file descriptor"
