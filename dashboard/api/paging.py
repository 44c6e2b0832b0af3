"""The API's lists, a page at a time by the position of the page's edge (keyset), never by an
offset: ``?cursor=`` names the last row read, and the next page is the rows after it in the
list's order, which an index finds at once. An offset made the database read and skip every row
before the page: the last page of 20,000 trials took over twice its time at 2,000.

The order is the queryset's own (each viewset orders its list), made total by the primary key
last, so rows that tie on the order are neither skipped nor repeated at a page's edge. The
envelope is ``{"next", "previous", "results"}``: links (or null) to the pages either side. No
count: counting every row of a large list costs what the offset did.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Q, QuerySet
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import BasePagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.utils.urls import remove_query_param, replace_query_param

CURSOR = "cursor"
BAD_CURSOR = "cursor is not one this API gave: follow the next and previous links of a list's pages"


def _order_fields(queryset: QuerySet) -> list[str]:
    """The queryset's ordering as field paths ("-" for descending), primary key last."""
    ordering = [field for field in queryset.query.order_by if isinstance(field, str)]
    if len(ordering) != len(queryset.query.order_by):
        raise TypeError(
            f"a keyset page needs an ordering by field names, not {queryset.query.order_by!r}"
        )
    names = {field.lstrip("-") for field in ordering}
    if not names & {"pk", "id", queryset.model._meta.pk.name}:
        # Descending with the rest when the list is newest first.
        ordering.append("-pk" if ordering[-1].startswith("-") else "pk")
    return ordering


def _value_of(instance: Any, path: str) -> Any:
    value = instance
    for part in path.split("__"):
        value = value[part] if isinstance(value, dict) else getattr(value, part)
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    return value


def _after(ordering: list[str], values: list[Any], *, backwards: bool) -> Q:
    """Rows after ``values`` in ``ordering`` (before them, ``backwards``), written as
    ``a >= x AND (a > x OR (a = x AND ...))`` so an index on the leading field serves it."""
    field, *rest = ordering
    value, *others = values
    name = field.lstrip("-")
    ascending = field.startswith("-") == backwards
    strictly = Q(**{f"{name}__{'gt' if ascending else 'lt'}": value})
    if not rest:
        return strictly
    return Q(**{f"{name}__{'gte' if ascending else 'lte'}": value}) & (
        strictly | (Q(**{name: value}) & _after(rest, others, backwards=backwards))
    )


class KeysetPagination(BasePagination):
    """Pages of ``PAGE_SIZE`` rows by keyset; see the module's docstring."""

    page_size = api_settings.PAGE_SIZE or 100

    def paginate_queryset(
        self, queryset: QuerySet, request: Request, view: Any = None
    ) -> list[Any]:
        self.request = request
        self.ordering = _order_fields(queryset)
        queryset = queryset.order_by(*self.ordering)
        backwards, position = self._decode(request)
        if position is not None:
            try:
                queryset = queryset.filter(_after(self.ordering, position, backwards=backwards))
            except (ValueError, TypeError, DjangoValidationError):  # a value of the wrong type
                raise ValidationError({CURSOR: BAD_CURSOR}) from None
        if backwards:
            queryset = queryset.reverse()
        rows = list(queryset[: self.page_size + 1])
        more = len(rows) > self.page_size
        rows = rows[: self.page_size]
        if backwards:
            rows.reverse()
        # The side we came from has rows (the cursor's own); the other has them when one more
        # row than the page was found.
        has_next = more if not backwards else position is not None
        has_previous = more if backwards else position is not None
        self._next = self._link(rows[-1], backwards=False) if rows and has_next else None
        self._previous = self._link(rows[0], backwards=True) if rows and has_previous else None
        return rows

    def get_paginated_response(self, data: Any) -> Response:
        return Response({"next": self._next, "previous": self._previous, "results": data})

    def _decode(self, request: Request) -> tuple[bool, list[Any] | None]:
        encoded = request.query_params.get(CURSOR)
        if not encoded:
            return False, None
        try:
            padded = encoded + "=" * (-len(encoded) % 4)
            cursor = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
            backwards, position = bool(cursor["b"]), list(cursor["p"])
        except (ValueError, KeyError, TypeError, binascii.Error, UnicodeEncodeError):
            raise ValidationError({CURSOR: BAD_CURSOR}) from None
        if len(position) != len(self.ordering):
            raise ValidationError({CURSOR: BAD_CURSOR})
        return backwards, position

    def _link(self, row: Any, *, backwards: bool) -> str:
        position = [_value_of(row, field.lstrip("-")) for field in self.ordering]
        cursor = {"b": backwards, "p": position}
        encoded = base64.urlsafe_b64encode(json.dumps(cursor, separators=(",", ":")).encode())
        url = remove_query_param(self.request.build_absolute_uri(), "page")
        return replace_query_param(url, CURSOR, encoded.decode("ascii").rstrip("="))

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        link = {"type": "string", "nullable": True, "format": "uri"}
        return {
            "type": "object",
            "required": ["next", "previous", "results"],
            "properties": {
                "next": {**link, "description": "The next page, or null on the last."},
                "previous": {**link, "description": "The page before, or null on the first."},
                "results": schema,
            },
        }

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {
                "name": CURSOR,
                "required": False,
                "in": "query",
                "description": "A page's position, from a list's next or previous link.",
                "schema": {"type": "string"},
            }
        ]
