"""Two hand-built conversations aligned as the side-by-side page aligns them: which events
pair, where the first divergence is, and what a window of rows folds."""

from __future__ import annotations

from dashboard.trial_alignment import (
    CONTEXT_ROWS,
    WINDOW_ROWS,
    AlignedEvent,
    Divergence,
    Fold,
    Row,
    align,
    signature,
)


def _events(*steps: tuple[int, str, dict]) -> list[AlignedEvent]:
    """(turn, kind, data) steps as the alignment reads them, seq numbered from 10 so a seq is
    never mistaken for a position."""
    return [
        AlignedEvent(10 + n, turn, signature(kind, data))
        for n, (turn, kind, data) in enumerate(steps)
    ]


def say(text: str) -> tuple[str, dict]:
    return "Message", {"role": "assistant", "text": text}


def run(command: str, exit_code: int = 0, output: str = "") -> tuple[str, dict]:
    return "Command", {"command": command, "exit_code": exit_code, "output": output}


def wrote(*paths: str) -> tuple[str, dict]:
    return "FileChange", {"paths": list(paths)}


PROMPTS = {0: "Fix the failing test.", 1: "Now add a changelog entry."}

# A: reads, runs the tests, fixes app.py, runs them again; then writes the changelog.
A = _events(
    (0, *say("Let me look at the test.")),
    (0, *run("cat tests/test_app.py")),
    (0, *run("pytest -q", 1, "1 failed in 0.31s")),
    (0, *wrote("/tmp/proctor-trial-a1b2/workspace/app.py")),
    (0, *run("pytest -q", 0, "3 passed in 0.30s")),
    (0, *say("Fixed.")),
    (1, *wrote("CHANGELOG.md")),
    (1, *say("Added the entry.")),
)
# B: the same start (its own trial folder, other timings), then it edits the test instead of
# app.py and never runs the tests again; the second turn is the same.
B = _events(
    (0, *say("Let me look at the test.")),
    (0, *run("cat tests/test_app.py")),
    (0, *run("pytest -q", 1, "1 failed in 0.52s")),
    (0, *wrote("/tmp/proctor-trial-ffee99/workspace/tests/test_app.py")),
    (0, *say("Fixed.")),
    (1, *wrote("CHANGELOG.md")),
    (1, *say("Added the entry.")),
)


def _rows(alignment, turn: int) -> list[Row]:
    found = alignment.turn(turn)
    return found.rows_between(0, found.rows)


def test_it_pairs_the_same_steps_despite_other_trial_folders_and_timings():
    alignment = align(A, B, PROMPTS, PROMPTS)

    rows = _rows(alignment, 0)
    assert [(r.kind, r.a_seq, r.b_seq) for r in rows] == [
        ("same", 10, 10),
        ("same", 11, 11),
        ("same", 12, 12),  # pytest failed in both, in other times
        ("changed", 13, 13),  # app.py against tests/test_app.py
        ("only_a", 14, None),  # A ran the tests again; B did not
        ("same", 15, 14),
    ]
    assert [(r.kind, r.a_seq, r.b_seq) for r in _rows(alignment, 1)] == [
        ("same", 16, 15),
        ("same", 17, 16),
    ]


def test_the_first_divergence_is_the_first_row_that_differs():
    alignment = align(A, B, PROMPTS, PROMPTS)

    assert alignment.divergence == Divergence(turn=0, row=3)
    first, second = alignment.turns
    assert (first.rows, first.differing_rows, first.same) == (6, 2, False)
    assert second.same


def test_a_turn_whose_message_differs_diverges_at_the_turn():
    alignment = align(A, A, PROMPTS, {**PROMPTS, 1: "Now add a README entry."})

    assert alignment.divergence == Divergence(turn=1, row=None)
    assert alignment.turn(1).prompt_differs
    assert alignment.turn(0).same


def test_a_turn_only_one_trial_had_diverges_at_the_turn():
    shorter = [event for event in A if event.turn_index == 0]

    alignment = align(A, shorter, PROMPTS, {0: PROMPTS[0]})

    assert alignment.divergence == Divergence(turn=1, row=None)
    second = alignment.turn(1)
    assert (second.in_a, second.in_b) == (True, False)
    assert [r.kind for r in _rows(alignment, 1)] == ["only_a", "only_a"]


def test_two_equal_conversations_do_not_diverge():
    alignment = align(A, A, PROMPTS, PROMPTS)

    assert alignment.divergence is None
    assert all(turn.same for turn in alignment.turns)


def test_a_changed_exit_code_or_message_is_a_difference():
    assert signature(*run("pytest -q", 0)) != signature(*run("pytest -q", 1))
    assert signature(*say("Done.")) != signature(*say("Done!"))
    assert signature(*say("Done.\n")) == signature(*say("  Done. "))


def _long_pair(same_before: int, same_after: int):
    """One turn: ``same_before`` equal steps, one that differs, ``same_after`` equal steps."""
    steps_a = [(0, *say(f"step {n}")) for n in range(same_before)]
    steps_b = list(steps_a)
    steps_a.append((0, *run("make", 2)))
    steps_b.append((0, *run("make", 0)))
    tail = [(0, *say(f"after {n}")) for n in range(same_after)]
    return align(_events(*steps_a, *tail), _events(*steps_b, *tail), {0: "go"}, {0: "go"})


def test_a_window_folds_the_sameness_far_from_a_difference():
    alignment = _long_pair(same_before=5_000, same_after=5_000)
    turn = alignment.turn(0)
    assert alignment.divergence == Divergence(0, 5_000)

    items, next_start = turn.window()

    # The 4,997 equal rows before the difference fold into one item, three stay beside it,
    # and after it three more, then the rest folds.
    assert items[0] == Fold(0, 5_000 - CONTEXT_ROWS)
    drawn = [item for item in items if isinstance(item, Row)]
    assert [row.position for row in drawn] == list(range(4_997, 5_004))
    assert [row.kind for row in drawn].count("changed") == 1
    assert items[-1] == Fold(5_004, 10_001)
    assert next_start is None


def test_an_unfolded_range_comes_a_window_at_a_time():
    alignment = _long_pair(same_before=5_000, same_after=0)
    turn = alignment.turn(0)

    items, next_start = turn.window(0, 4_997, folding=False)

    assert len(items) == WINDOW_ROWS
    assert all(isinstance(item, Row) and item.kind == "same" for item in items)
    assert next_start == WINDOW_ROWS
    rest, after = turn.window(4_900, 4_997, folding=False)
    assert [item.position for item in rest if isinstance(item, Row)] == list(range(4_900, 4_997))
    assert after is None
