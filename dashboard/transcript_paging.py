"""A trial's transcript read a page at a time: events in order, with each turn's user message
placed before the first event of that turn.

A trial can hold many thousand events; the trial page shows the first page and loads the
rest as the reader scrolls, and live updates append what arrives after the page was drawn.
Each page costs three queries (the events, the turn of the event before, the turns), and a
fourth when it opens a turn a responder or simulated user wrote (their consultations).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from evals_app.models import Consultation, Event, Trial, Turn

PAGE_SIZE = 200


# Turn origins written by a consultation, and the consultation kind that wrote them.
_CONSULTED_ORIGINS = {
    "responder": Consultation.Kind.RESPONDER,
    "simulated_user": Consultation.Kind.SIMULATED_USER,
}


@dataclass(frozen=True)
class OpenedTurn:
    """A turn's message as the transcript opens it, with the consultation that wrote it (the
    responder's or simulated user's, consulted after the round before), when there is one."""

    turn: Turn
    consultation: Consultation | None = None


@dataclass
class TranscriptEntry:
    """One event, or a run of shell commands the tracer saw, with the turns (usually none, at
    most a few) that open before it."""

    event: Event | None
    opens: tuple[OpenedTurn, ...] = ()
    # Commands seen by the shell recorder rather than reported by the agent: many, terse, and
    # shown folded so the agent's own account stays readable.
    traced: list[Event] = field(default_factory=list)

    @property
    def events(self) -> list[Event]:
        return [self.event] if self.event is not None else self.traced


@dataclass(frozen=True)
class TranscriptPage:
    trial: Trial
    entries: list[TranscriptEntry]
    # The seq this page starts after, and the last seq it may reach (the end of the record
    # when the page was first drawn; live updates bring what comes later).
    after: int
    upto: int | None
    next_after: int | None
    # The highest turn index whose message has been shown, this page included.
    turns_shown: int
    last_turn: int | None = None

    @property
    def last_seq(self) -> int:
        seqs = [event.seq for entry in self.entries for event in entry.events]
        return seqs[-1] if seqs else self.after


def last_seq(trial: Trial) -> int:
    """The seq of the trial's latest stored event, -1 when it has none (one query)."""
    seq = Event.objects.filter(trial=trial).order_by("-seq").values_list("seq", flat=True).first()
    return -1 if seq is None else seq


def last_turn(trial: Trial) -> int:
    """The index of the trial's latest turn, -1 when it has none (one query)."""
    index = (
        Turn.objects.filter(trial=trial).order_by("-index").values_list("index", flat=True).first()
    )
    return -1 if index is None else index


def transcript_page(
    trial: Trial,
    *,
    after: int = -1,
    upto: int | None = None,
    limit: int = PAGE_SIZE,
    turns_shown: int | None = None,
    last_turn: int | None = None,
) -> TranscriptPage:
    """Events with ``after < seq <= upto`` (no upper bound when ``upto`` is None), at most
    ``limit`` of them; ``next_after`` is set when more remain.

    Each turn's message opens once, before its first event. ``turns_shown`` says which turns
    the reader has already seen (by default: up to the turn of the event at ``after``); when
    the page reaches the end, turns that have no event yet open too, up to ``last_turn``.
    """
    events_query = Event.objects.filter(trial=trial, seq__gt=after).order_by("seq")
    if upto is not None:
        events_query = events_query.filter(seq__lte=upto)
    events = list(events_query[: limit + 1])
    has_more = len(events) > limit
    events = events[:limit]

    if turns_shown is None:
        previous = (
            Event.objects.filter(trial=trial, seq__lte=after)
            .order_by("-seq")
            .values_list("turn_index", flat=True)
            .first()
        )
        turns_shown = -1 if previous is None else previous
    turns = {turn.index: turn for turn in Turn.objects.filter(trial=trial)}

    entries: list[TranscriptEntry] = []
    for event in events:
        opens: tuple[OpenedTurn, ...] = ()
        if event.turn_index > turns_shown:
            opens = tuple(
                OpenedTurn(turns[i])
                for i in range(turns_shown + 1, event.turn_index + 1)
                if i in turns
            )
            turns_shown = event.turn_index
        if _is_traced(event):
            if (
                not opens
                and entries
                and entries[-1].traced
                and entries[-1].traced[-1].turn_index == event.turn_index
            ):
                entries[-1].traced.append(event)
            else:
                entries.append(TranscriptEntry(event=None, opens=opens, traced=[event]))
            continue
        entries.append(TranscriptEntry(event=event, opens=opens))
    if not has_more:
        # Turns that started but have no event yet still show their message, so a reader
        # sees what the agent is working on.
        trailing = tuple(
            OpenedTurn(turns[i])
            for i in sorted(turns)
            if i > turns_shown and (last_turn is None or i <= last_turn)
        )
        if trailing:
            entries.append(TranscriptEntry(event=None, opens=trailing))
            turns_shown = trailing[-1].turn.index
    _attach_consultations(trial, entries)
    return TranscriptPage(
        trial=trial,
        entries=entries,
        after=after,
        upto=upto,
        next_after=events[-1].seq if has_more else None,
        turns_shown=turns_shown,
        last_turn=last_turn,
    )


def _consulted_kind(turn: Turn) -> str | None:
    for key, kind in _CONSULTED_ORIGINS.items():
        if key in (turn.origin or {}):
            return kind
    return None


def _attach_consultations(trial: Trial, entries: list[TranscriptEntry]) -> None:
    """Pair each opened turn a responder or simulated user wrote with its consultation (one
    query, none when the page opens no such turn). A consultation follows the round it read,
    so the turn it wrote is the next one."""
    wanted = {
        (kind, opened.turn.index - 1)
        for entry in entries
        for opened in entry.opens
        if (kind := _consulted_kind(opened.turn)) is not None
    }
    if not wanted:
        return
    found: dict[tuple[str, int | None], Consultation] = {}
    for consultation in Consultation.objects.filter(
        trial=trial,
        kind__in={kind for kind, _ in wanted},
        turn_index__in={index for _, index in wanted},
    ).order_by("created_at", "id"):
        # The latest wins: it is the one whose reply was delivered.
        found[(consultation.kind, consultation.turn_index)] = consultation
    for entry in entries:
        entry.opens = tuple(
            OpenedTurn(
                opened.turn,
                found.get((kind, opened.turn.index - 1))
                if (kind := _consulted_kind(opened.turn))
                else None,
            )
            for opened in entry.opens
        )


def _is_traced(event: Event) -> bool:
    return event.kind == Event.Kind.COMMAND and (event.data or {}).get("origin") == "trace"
