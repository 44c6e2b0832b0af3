"""Query values with a NUL byte are refused with a 400 before any view reads them.

No stored text can hold a NUL (PostgreSQL's text fields refuse it outright), so a search or a
filter carrying one can only fail deep in a query as a 500. One sentence instead, naming the
parameter: JSON in DRF's error shape under /api/, plain text on the pages.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

from dashboard.query_numbers import shown


class RefuseNulBytesInQueries:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        for name, values in request.GET.lists():
            if "\x00" in name or any("\x00" in value for value in values):
                field = name.replace("\x00", "")[:40] or "query"
                sentence = (
                    f"{field} holds a NUL byte, which no stored text can contain"
                    f" (got {shown(name + '=' + (values[0] if values else ''))})."
                )
                if request.path.startswith("/api/"):
                    return JsonResponse({field: [sentence]}, status=400)
                return HttpResponseBadRequest(sentence, content_type="text/plain; charset=utf-8")
        return self.get_response(request)
