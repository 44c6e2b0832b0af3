"""What the side-by-side page reads of two trials of one case: their aligned conversations
(dashboard.trial_alignment), a window of rows at a time with its events, their checks paired
by name, and the trials a reader may compare one with.

Aligning two trials reads what the alignment needs of every event (kind, seq, turn and the
start of each compared value, two queries) and of every turn (two more); two finished trials'
alignment is kept in the cache, so a reader paging through it pays that once. A window then
costs one query per trial for its (at most WINDOW_ROWS) events.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.cache import cache
from django.db.models import Expression
from django.db.models.fields.json import KT
from django.db.models.functions import Right, Substr

from dashboard.access import trials_for
from dashboard.trial_alignment import (
    ALIGNED_KINDS,
    OUTPUT_TAIL_CHARS,
    SIGNATURE_CHARS,
    SIGNATURE_KEYS,
    TRACED_ORIGIN,
    AlignedEvent,
    Alignment,
    Fold,
    Row,
    TurnAlignment,
    align,
    signature,
)
from evals_app.models import Check, Event, Trial, Turn
from runner.sandboxes.workspace_paths import shown_path

# How long two finished trials' alignment is kept, and what its key says of its layout.
ALIGNMENT_CACHE_SECONDS = 3600
ALIGNMENT_LAYOUT = 1
# The trials the picker offers.
PICKER_SIZE = 100
# Turn sections drawn per request.
TURNS_PER_PAGE = 50
_LONG_KEYS = {"text", "command", "input", "error"}


def _signature_columns() -> dict[str, Expression]:
    columns: dict[str, Expression] = {}
    for key in SIGNATURE_KEYS:
        value = KT(f"data__{key}")
        if key == "output":
            columns[f"sig_{key}"] = Right(value, OUTPUT_TAIL_CHARS)
        elif key in _LONG_KEYS:
            columns[f"sig_{key}"] = Substr(value, 1, SIGNATURE_CHARS)
        else:
            columns[f"sig_{key}"] = value
    return columns


def aligned_events(trial: Trial) -> list[AlignedEvent]:
    """The trial's events the alignment reads, in order (one query; long values are read up
    to SIGNATURE_CHARS, never whole). Commands only the shell recorder saw are left out, as
    the trial page folds them: the agent's own account is what two trials are compared by."""
    columns = _signature_columns()
    rows = (
        Event.objects.filter(trial=trial, kind__in=ALIGNED_KINDS)
        .order_by("seq")
        .annotate(**columns)
        .values_list("seq", "turn_index", "kind", *columns)
    )
    found = []
    for seq, turn, kind, *values in rows:
        data = dict(zip(SIGNATURE_KEYS, values, strict=True))
        if kind == Event.Kind.COMMAND and data["origin"] == TRACED_ORIGIN:
            continue
        found.append(AlignedEvent(seq, turn, signature(kind, data)))
    return found


def turn_prompts(trial: Trial) -> dict[int, str]:
    """Each turn's message by index, up to SIGNATURE_CHARS (one query)."""
    return dict(
        Turn.objects.filter(trial=trial).values_list("index", Substr("prompt", 1, SIGNATURE_CHARS))
    )


def _identity(trial: Trial) -> str:
    moments = (trial.started_at, trial.finished_at)
    return f"{trial.pk}.{trial.attempt}." + ".".join(
        str(m.timestamp()) if m else "-" for m in moments
    )


def alignment_of(a: Trial, b: Trial) -> Alignment:
    """The two trials aligned: from the cache when both are finished and were aligned before,
    else read and aligned now (four queries)."""
    key = None
    if a.is_final and b.is_final:
        key = f"side-by-side:{ALIGNMENT_LAYOUT}:{_identity(a)}:{_identity(b)}"
        kept = cache.get(key)
        if isinstance(kept, Alignment):
            return kept
    alignment = align(aligned_events(a), aligned_events(b), turn_prompts(a), turn_prompts(b))
    if key is not None:
        cache.set(key, alignment, ALIGNMENT_CACHE_SECONDS)
    return alignment


@dataclass(frozen=True)
class PairedRow:
    row: Row
    a: Event | None
    b: Event | None


@dataclass(frozen=True)
class TurnWindow:
    """Rows of one turn ready to draw: events paired, sameness folded; ``next_start`` is where
    the next window starts (None at ``stop``)."""

    turn: TurnAlignment
    items: list[PairedRow | Fold]
    next_start: int | None
    stop: int
    folding: bool


def turn_window(
    a: Trial,
    b: Trial,
    turn: TurnAlignment,
    *,
    start: int = 0,
    stop: int | None = None,
    folding: bool = True,
) -> TurnWindow:
    """A window of ``turn``'s rows with their events (one query per trial that has any)."""
    stop = turn.rows if stop is None else min(stop, turn.rows)
    items, next_start = turn.window(start, stop, folding=folding)
    rows = [item for item in items if isinstance(item, Row)]
    events_a = _events(a, [r.a_seq for r in rows if r.a_seq is not None])
    events_b = _events(b, [r.b_seq for r in rows if r.b_seq is not None])
    paired: list[PairedRow | Fold] = [
        PairedRow(
            item,
            events_a.get(item.a_seq) if item.a_seq is not None else None,
            events_b.get(item.b_seq) if item.b_seq is not None else None,
        )
        if isinstance(item, Row)
        else item
        for item in items
    ]
    return TurnWindow(turn, paired, next_start, stop, folding)


def _events(trial: Trial, seqs: list[int]) -> dict[int, Event]:
    if not seqs:
        return {}
    return {event.seq: event for event in Event.objects.filter(trial=trial, seq__in=seqs)}


@dataclass(frozen=True)
class TurnSection:
    """A turn of the pair as the page heads it: each trial's message (None when that trial
    has no such turn)."""

    turn: TurnAlignment
    a: Turn | None
    b: Turn | None


def turn_sections(a: Trial, b: Trial, turns: list[TurnAlignment]) -> list[TurnSection]:
    """The messages of these turns in both trials (two queries)."""
    indexes = [turn.index for turn in turns]
    of_a = {t.index: t for t in Turn.objects.filter(trial=a, index__in=indexes)}
    of_b = {t.index: t for t in Turn.objects.filter(trial=b, index__in=indexes)}
    return [TurnSection(turn, of_a.get(turn.index), of_b.get(turn.index)) for turn in turns]


@dataclass(frozen=True)
class CheckPair:
    name: str
    kind: str
    a: Check | None
    b: Check | None

    @property
    def differs(self) -> bool:
        if self.a is None or self.b is None:
            return True
        return self.a.passed != self.b.passed or self.a.score != self.b.score


def check_pairs(a: Trial, b: Trial) -> list[CheckPair]:
    """Each check of either trial with its namesake in the other (by kind and name, the n-th
    with the n-th), in A's order then B's others (one query)."""
    checks = list(Check.objects.filter(trial_id__in=[a.pk, b.pk]).order_by("index", "id"))
    keyed: dict[tuple[str, str, int], dict[int, Check]] = {}
    seen: dict[tuple[int, str, str], int] = {}
    order: list[tuple[str, str, int]] = []
    for trial_id in (a.pk, b.pk):
        for check in (c for c in checks if c.trial_id == trial_id):
            n = seen.get((trial_id, check.kind, check.name), 0)
            seen[(trial_id, check.kind, check.name)] = n + 1
            key = (check.kind, check.name, n)
            if key not in keyed:
                keyed[key] = {}
                order.append(key)
            keyed[key][trial_id] = check
    return [
        CheckPair(name, kind, keyed[key].get(a.pk), keyed[key].get(b.pk))
        for key in order
        for kind, name, _n in [key]
    ]


def comparable_trials(user, trial: Trial) -> list[Trial]:
    """The reader's other trials of ``trial``'s case, newest batch first (one query)."""
    return list(
        trials_for(user)
        .filter(run__case_version__case_id=trial.run.case_version.case_id)
        .exclude(pk=trial.pk)
        .select_related("run__batch", "run__variant", "run__case_version")
        .order_by("-run__batch__created_at", "-run__batch_id", "run__variant__name", "index")[
            :PICKER_SIZE
        ]
    )


def describe(event: Event | None) -> str:
    """One line of what an event did, for the divergence's summary."""
    if event is None:
        return "nothing here"
    data = event.data or {}

    def short(value: object) -> str:
        text = " ".join(str(value or "").split())
        return text if len(text) <= 80 else text[:79] + "…"

    if event.kind == Event.Kind.MESSAGE:
        return f"said “{short(data.get('text'))}”"
    if event.kind == Event.Kind.COMMAND:
        return f"ran `{short(data.get('command'))}` (exit {data.get('exit_code')})"
    if event.kind == Event.Kind.TOOL_CALL:
        return f"called {short(data.get('name'))}"
    if event.kind == Event.Kind.FILE_CHANGE:
        return f"changed {short(', '.join(shown_path(str(p)) for p in data.get('paths') or []))}"
    if event.kind == Event.Kind.FINISHED:
        return f"finished ({short(data.get('reason'))})"
    return f"{event.kind}: {short(data.get('error') or data.get('text'))}"
