"""The dashboard's HTML views, one module per page. Each view serves its full page and, for
HTMX requests, the fragment that changed, from the same template."""

from __future__ import annotations

from typing import overload

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django_htmx.middleware import HtmxDetails

from dashboard.query_numbers import NumberOutOfRange, whole_number


class HtmxHttpRequest(HttpRequest):
    """A request as django-htmx's middleware leaves it: ``request.htmx`` is falsy unless HTMX
    sent it."""

    htmx: HtmxDetails


@overload
def int_param(request: HttpRequest, name: str, default: int) -> int: ...
@overload
def int_param(request: HttpRequest, name: str, default: None = None) -> int | None: ...


def int_param(request: HttpRequest, name: str, default: int | None = None) -> int | None:
    """A whole-number query parameter; a missing or malformed one reads as ``default``, one
    beyond 64 bits raises NumberOutOfRange (a 400: no query could use it)."""
    raw = request.GET.get(name, "")
    try:
        return whole_number(name, raw)
    except ValueError:
        return default


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The 400 page (``handler400``): the sentence of a bad query value, else a generic one
    (other 400s, like a bad Host header, carry details not meant for the reader)."""
    sentence = str(exception) if isinstance(exception, NumberOutOfRange) else "Bad request."
    return HttpResponseBadRequest(sentence, content_type="text/plain; charset=utf-8")
