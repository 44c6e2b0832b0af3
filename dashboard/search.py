"""Search over what trials produced: the agent's answers, the checks' messages and the
transcript events. On PostgreSQL it is full-text search (stemmed words, ``websearch`` syntax:
``"exact phrase"``, ``-word``, ``or``); on SQLite, which has no such index, a case-insensitive
substring match of the whole text.

One query whatever the number of trials: the three sources are subqueries of it.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection
from django.db.models import F, Func, Q, QuerySet, TextField
from django.db.models.functions import Cast

from evals_app.models import Check, Event, Run, Trial


class JsonStringsVector(Func):
    """PostgreSQL's ``jsonb_to_tsvector``: the words of a JSON column's string values."""

    function = "jsonb_to_tsvector"
    template = "%(function)s('english'::regconfig, %(expressions)s, '[\"string\"]')"

    def __init__(self, field: str) -> None:
        from django.contrib.postgres.search import SearchVectorField

        super().__init__(F(field), output_field=SearchVectorField())


def uses_full_text() -> bool:
    """True where the database has full-text search (PostgreSQL)."""
    return connection.vendor == "postgresql"


def _matching(queryset: QuerySet, field: str, text: str) -> QuerySet:
    """Rows of ``queryset`` whose ``field`` (text, or JSON read as text) matches ``text``."""
    if uses_full_text():
        from django.contrib.postgres.search import SearchQuery, SearchVector

        vector = (
            # Only the string values of an event, not its keys.
            JsonStringsVector(field)
            if field == "data"
            else SearchVector(Cast(field, TextField()), config="english")
        )
        query = SearchQuery(text, search_type="websearch", config="english")
        return queryset.annotate(_search=vector).filter(_search=query)
    if field == "data":
        # A JSON column: match its text (on SQLite the stored JSON is text already).
        return queryset.annotate(_text=Cast(field, TextField())).filter(_text__icontains=text)
    return queryset.filter(**{f"{field}__icontains": text})


def matching_cells(batch_ids: Iterable[int], text: str) -> set[tuple[int, int]]:
    """The cells, as (case version id, variant id), of the runs of ``batch_ids`` with a trial
    whose answer, a check message or a transcript event matches ``text`` (one query)."""
    batch_ids = list(batch_ids)
    text = text.strip()
    if not text:
        return set()
    trials = Trial.objects.filter(run__batch_id__in=batch_ids)
    answers = _matching(trials, "answer", text).values("run_id")
    messages = _matching(
        Check.objects.filter(trial__run__batch_id__in=batch_ids), "message", text
    ).values("trial__run_id")
    events = _matching(
        Event.objects.filter(trial__run__batch_id__in=batch_ids), "data", text
    ).values("trial__run_id")
    return set(
        Run.objects.filter(batch_id__in=batch_ids)
        .filter(Q(pk__in=answers) | Q(pk__in=messages) | Q(pk__in=events))
        .order_by()
        .values_list("case_version_id", "variant_id")
        .distinct()
    )
