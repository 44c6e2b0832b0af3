"""The Content-Security-Policy every page carries: pages show text an agent wrote, so even if
some of it slipped past escaping as markup, the browser runs no script but our own files.

Scripts come only from our static files (htmx and its websocket extension are vendored, the
API docs page loads drf-spectacular-sidecar's files and its init script from a URL), so no
nonce is needed. A view may set a stricter policy of its own (an artifact is served with
``sandbox``); the middleware leaves that one alone.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

HEADER = "Content-Security-Policy"

POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        # Inline style attributes stay allowed (style only, never script): the grid's progress
        # bars and the pass-rate colours are computed per cell (style="width: 40%"), and htmx
        # adds a <style> for its indicators. Styles cannot run code.
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        # The live grid and pages follow updates over a websocket to this same host.
        "connect-src 'self' ws: wss:",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


class ContentSecurityPolicyMiddleware:
    """Adds ``POLICY`` to every response that has no policy of its own."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if HEADER not in response:
            response[HEADER] = POLICY
        return response
