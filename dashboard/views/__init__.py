"""The dashboard's HTML views, one module per page. Each view serves its full page and, for
HTMX requests, the fragment that changed, from the same template."""

from __future__ import annotations

from typing import overload

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """A request as django-htmx's middleware leaves it: ``request.htmx`` is falsy unless HTMX
    sent it."""

    htmx: HtmxDetails


@overload
def int_param(request: HttpRequest, name: str, default: int) -> int: ...
@overload
def int_param(request: HttpRequest, name: str, default: None = None) -> int | None: ...


def int_param(request: HttpRequest, name: str, default: int | None = None) -> int | None:
    """A whole-number query parameter; a missing or malformed one reads as ``default``."""
    raw = request.GET.get(name, "")
    try:
        return int(raw)
    except ValueError:
        return default
