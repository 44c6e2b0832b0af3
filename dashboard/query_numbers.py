"""Whole numbers read from a request (a query parameter), checked against what a database
column can hold: SQLite's INTEGER and PostgreSQL's bigint are 64 bits, and a larger number
reaching a query is an OverflowError or a DataError (a 500), not an empty result."""

from __future__ import annotations

from django.core.exceptions import BadRequest

SMALLEST = -(2**63)
LARGEST = 2**63 - 1
# A value echoed in an error is cut to this many characters (a fuzzer sends megabytes).
SHOWN = 40


class NumberOutOfRange(BadRequest):
    """A query parameter that is a whole number no database column holds; answered 400 with
    its one sentence (see ``dashboard.views.bad_request``)."""


def shown(raw: str) -> str:
    return repr(raw if len(raw) <= SHOWN else raw[:SHOWN] + "...")


def whole_number(name: str, raw: str) -> int:
    """``raw`` as an int; ValueError when it is not a whole number, NumberOutOfRange when it
    does not fit in 64 bits."""
    value = int(raw)  # ValueError for text, and for more than 4,300 digits
    if not SMALLEST <= value <= LARGEST:
        raise NumberOutOfRange(
            f"{name} must be a whole number between {SMALLEST} and {LARGEST}, not {shown(raw)}."
        )
    return value
