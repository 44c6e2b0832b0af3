"""Two trials' conversations aligned for the side-by-side page: turn by turn (by index), and
within a turn event by event, by a sequence alignment (difflib's) of each event's signature.

A signature is the event's kind and its content made comparable across trials: the trial's
own workspace folder, long hex ids and timings are blanked, whitespace is collapsed. Only the
kinds a reader compares are aligned (messages, commands, tool calls, file changes, the end);
usage reports, session starts and log lines differ between any two runs and say nothing, and
the commands only the shell recorder saw would drown the agent's own account.

Django-free: the page reads the events (dashboard.side_by_side) and draws a window of rows at
a time; nothing here is proportional to more than the two trials' event counts.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from runner.sandboxes.workspace_paths import shown_path

# What the alignment reads; the other kinds are left out of it (see the module's docstring).
ALIGNED_KINDS = ("Message", "Command", "ToolCall", "FileChange", "Finished", "ProtocolError")
# A command whose data has this origin was seen by the shell recorder, not reported by the
# agent: left out too (many and terse; the trial page folds them).
TRACED_ORIGIN = "trace"
# The data keys a signature reads, per kind. Long values are compared by their start, but a
# command's output by its end, where the summary and the error are.
SIGNATURE_KEYS = (
    "role",
    "text",
    "command",
    "exit_code",
    "output",
    "origin",
    "name",
    "input",
    "error",
    "paths",
    "reason",
)
SIGNATURE_CHARS = 2000
OUTPUT_TAIL_CHARS = 500

# Rows of a window, and the rows of sameness kept around a difference before the rest folds.
WINDOW_ROWS = 100
CONTEXT_ROWS = 3
# An equal run folds only when it hides at least this many rows.
FOLD_MIN = 4

_TRIAL_FOLDER_NAME = "proctor-trial-"
_TRIAL_FOLDER = re.compile(r"/(?:[^/\s'\"]+/)*?proctor-trial-[^/\s'\"]+/workspace/?")
# Hex ids (a uuid, a commit, a temp name) and timings ("0.31s", "12 ms"), in one pass: the
# alignment normalises every compared value of 20,000 events, and each pass over the text
# costs as much as the others together.
_NOISE = re.compile(
    r"(?<![0-9A-Za-z])(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|[0-9a-f]{12,}|\d+(?:\.\d+)?\s?(?:ms|s|sec|seconds))(?![0-9A-Za-z])"
)


def normalised(value: object, *, tail: bool = False) -> str:
    """``value`` as text two trials can be compared by: the trial folder, hex ids and timings
    blanked, whitespace collapsed, cut at SIGNATURE_CHARS (with ``tail``, its last
    OUTPUT_TAIL_CHARS)."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = text[-OUTPUT_TAIL_CHARS:] if tail else text[:SIGNATURE_CHARS]
    if _TRIAL_FOLDER_NAME in text:
        text = _TRIAL_FOLDER.sub("", text)
    text = _NOISE.sub("#", text)
    return " ".join(text.split())


def _paths(value: object) -> list[str]:
    if isinstance(value, str):
        text = value
        try:
            value = json.loads(text)
        except ValueError:
            return [shown_path(text)]
    if not isinstance(value, list):
        return []
    return sorted(shown_path(p) if isinstance(p, str) else str(p) for p in value)


def signature(kind: str, data: Mapping[str, object]) -> str:
    """What makes two events "the same step": the kind and its normalised content."""
    parts: list[str]
    if kind == "Message":
        parts = [str(data.get("role") or "assistant"), normalised(data.get("text"))]
    elif kind == "Command":
        parts = [
            normalised(data.get("command")),
            str(data.get("exit_code")),
            normalised(data.get("output"), tail=True),
        ]
    elif kind == "ToolCall":
        parts = [
            normalised(data.get("name")),
            normalised(data.get("input")),
            normalised(data.get("error")),
        ]
    elif kind == "FileChange":
        parts = _paths(data.get("paths"))
    elif kind == "Finished":
        parts = [normalised(data.get("reason"))]
    else:
        parts = [normalised(data.get("error"))]
    return "\x1f".join([kind, *parts])


@dataclass(frozen=True)
class AlignedEvent:
    """What the alignment knows of an event: where it is and what it says."""

    seq: int
    turn_index: int
    signature: str


@dataclass(frozen=True)
class Row:
    """One row of the side-by-side view: an event of A, of B, or of both."""

    position: int
    kind: str  # "same", "changed" (both, different), "only_a", "only_b"
    a_seq: int | None
    b_seq: int | None


@dataclass(frozen=True)
class Fold:
    """Rows ``start`` to ``stop`` (excluded), the same in both trials and not drawn; the page
    loads them when asked."""

    start: int
    stop: int

    @property
    def count(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class TurnAlignment:
    """One turn index of the two trials: whether each has it, whether its messages differ,
    the aligned events' seqs and difflib's opcodes over them (each a (tag, i1, i2, j1, j2))."""

    index: int
    in_a: bool
    in_b: bool
    prompt_differs: bool
    a_seqs: tuple[int, ...]
    b_seqs: tuple[int, ...]
    opcodes: tuple[tuple[str, int, int, int, int], ...]
    # Each opcode's first row; filled in by __post_init__.
    _starts: tuple[int, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        starts, row = [], 0
        for tag, i1, i2, j1, j2 in self.opcodes:
            starts.append(row)
            row += _height(tag, i1, i2, j1, j2)
        object.__setattr__(self, "_starts", tuple(starts))

    @property
    def rows(self) -> int:
        if not self.opcodes:
            return 0
        tag, i1, i2, j1, j2 = self.opcodes[-1]
        return self._starts[-1] + _height(tag, i1, i2, j1, j2)

    @property
    def differing_rows(self) -> int:
        return sum(
            _height(tag, i1, i2, j1, j2) for tag, i1, i2, j1, j2 in self.opcodes if tag != "equal"
        )

    @property
    def first_difference(self) -> int | None:
        """The first row that is not the same in both, None when every row is."""
        for start, (tag, *_rest) in zip(self._starts, self.opcodes, strict=True):
            if tag != "equal":
                return start
        return None

    @property
    def same(self) -> bool:
        return self.in_a and self.in_b and not self.prompt_differs and not self.differing_rows

    def rows_between(self, start: int, stop: int) -> list[Row]:
        """The rows from ``start`` to ``stop`` (excluded), in order."""
        found: list[Row] = []
        for first, (tag, i1, i2, j1, j2) in zip(self._starts, self.opcodes, strict=True):
            height = _height(tag, i1, i2, j1, j2)
            if first + height <= start:
                continue
            if first >= stop:
                break
            for offset in range(max(0, start - first), min(height, stop - first)):
                found.append(self._row(first + offset, tag, i1, i2, j1, j2, offset))
        return found

    def _row(self, position: int, tag: str, i1: int, i2: int, j1: int, j2: int, k: int) -> Row:
        a = self.a_seqs[i1 + k] if i1 + k < i2 else None
        b = self.b_seqs[j1 + k] if j1 + k < j2 else None
        if tag == "equal":
            kind = "same"
        elif a is not None and b is not None:
            kind = "changed"
        else:
            kind = "only_a" if a is not None else "only_b"
        return Row(position, kind, a, b)

    def window(
        self, start: int = 0, stop: int | None = None, *, folding: bool = True
    ) -> tuple[list[Row | Fold], int | None]:
        """At most WINDOW_ROWS items from row ``start`` on (to ``stop``): rows, and with
        ``folding`` each long run of sameness folded but for CONTEXT_ROWS beside a difference.
        Returns the items and the row the next window starts at (None at ``stop``)."""
        stop = self.rows if stop is None else min(stop, self.rows)
        shown = self._shown_ranges(start, stop) if folding else [(start, stop, True)]
        items: list[Row | Fold] = []
        for first, last, drawn in shown:
            if not drawn:
                if len(items) >= WINDOW_ROWS:
                    return items, first
                items.append(Fold(first, last))
                continue
            room = WINDOW_ROWS - len(items)
            if last - first > room:
                items.extend(self.rows_between(first, first + room))
                return items, first + room
            items.extend(self.rows_between(first, last))
        return items, None

    def _shown_ranges(self, start: int, stop: int) -> list[tuple[int, int, bool]]:
        """[start, stop) cut into (first, last, drawn) ranges: sameness far from any
        difference is not drawn."""
        ranges: list[tuple[int, int, bool]] = []
        last_index = len(self.opcodes) - 1
        for n, (first, (tag, i1, i2, j1, j2)) in enumerate(
            zip(self._starts, self.opcodes, strict=True)
        ):
            end = first + _height(tag, i1, i2, j1, j2)
            parts = [(first, end, True)]
            if tag == "equal":
                head = first + (CONTEXT_ROWS if n > 0 else 0)
                tail = end - (CONTEXT_ROWS if n < last_index else 0)
                if tail - head >= FOLD_MIN:
                    parts = [(first, head, True), (head, tail, False), (tail, end, True)]
            for a, b, drawn in parts:
                a, b = max(a, start), min(b, stop)
                if a < b:
                    ranges.append((a, b, drawn))
        return ranges


def _height(tag: str, i1: int, i2: int, j1: int, j2: int) -> int:
    return max(i2 - i1, j2 - j1)


@dataclass(frozen=True)
class Divergence:
    """Where the two conversations first part: a turn, and the row within it (None when the
    turn itself differs: its message, or it is in one trial only)."""

    turn: int
    row: int | None


@dataclass(frozen=True)
class Alignment:
    turns: tuple[TurnAlignment, ...]
    divergence: Divergence | None

    def turn(self, index: int) -> TurnAlignment | None:
        return next((t for t in self.turns if t.index == index), None)


def align_events(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes over two lists of signatures. The common start and end are matched
    first, in one pass: two runs of one case mostly agree up to a point, and matching the
    rest alone keeps difflib's work to where they differ."""
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    middle = difflib.SequenceMatcher(
        None, a[head : len(a) - tail], b[head : len(b) - tail], autojunk=True
    ).get_opcodes()
    opcodes = [("equal", 0, head, 0, head)] if head else []
    for tag, i1, i2, j1, j2 in middle:
        opcodes.append((tag, i1 + head, i2 + head, j1 + head, j2 + head))
    if tail:
        opcodes.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    merged: list[tuple[str, int, int, int, int]] = []
    for code in opcodes:
        if code[1] == code[2] and code[3] == code[4]:
            continue
        if merged and merged[-1][0] == code[0] == "equal":
            _tag, i1, _i2, j1, _j2 = merged[-1]
            merged[-1] = ("equal", i1, code[2], j1, code[4])
        else:
            merged.append(code)
    return merged


def align(
    events_a: Iterable[AlignedEvent],
    events_b: Iterable[AlignedEvent],
    prompts_a: Mapping[int, str],
    prompts_b: Mapping[int, str],
) -> Alignment:
    """Pair the turns by index and align each turn's events (in seq order); ``prompts_*`` are
    each trial's turn messages by index."""
    by_turn_a = _by_turn(events_a)
    by_turn_b = _by_turn(events_b)
    indexes = sorted(set(prompts_a) | set(prompts_b) | set(by_turn_a) | set(by_turn_b))
    turns = []
    divergence = None
    for index in indexes:
        a_events, b_events = by_turn_a.get(index, []), by_turn_b.get(index, [])
        in_a = index in prompts_a or bool(a_events)
        in_b = index in prompts_b or bool(b_events)
        turn = TurnAlignment(
            index=index,
            in_a=in_a,
            in_b=in_b,
            prompt_differs=in_a
            and in_b
            and normalised(prompts_a.get(index)) != normalised(prompts_b.get(index)),
            a_seqs=tuple(e.seq for e in a_events),
            b_seqs=tuple(e.seq for e in b_events),
            opcodes=tuple(
                align_events([e.signature for e in a_events], [e.signature for e in b_events])
            ),
        )
        turns.append(turn)
        if divergence is None and not turn.same:
            whole_turn = turn.prompt_differs or not (in_a and in_b)
            divergence = Divergence(index, None if whole_turn else turn.first_difference)
    return Alignment(tuple(turns), divergence)


def _by_turn(events: Iterable[AlignedEvent]) -> dict[int, list[AlignedEvent]]:
    grouped: dict[int, list[AlignedEvent]] = {}
    for event in events:
        grouped.setdefault(event.turn_index, []).append(event)
    return grouped
