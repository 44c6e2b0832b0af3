"""How many reruns a user may start: PROCTOR_RERUN_RATE (default 30 a minute), counted once
across the dashboard's rerun buttons and the API's rerun actions, per user.

The counts live in Django's cache: the default in-process cache counts per server process,
so with several web processes each allows the rate (configure a shared cache to make it one).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from rest_framework.exceptions import Throttled
from rest_framework.throttling import UserRateThrottle


class RerunRateThrottle(UserRateThrottle):
    """DRF's per-user throttle, with its rate read from settings on every request (DRF reads
    its own rates once, at import)."""

    scope = "reruns"

    def get_rate(self) -> str:
        return settings.PROCTOR_RERUN_RATE


def too_many_reruns(wait: float | None) -> str:
    seconds = max(1, math.ceil(wait or 0))
    return (
        f"Too many reruns: at most {settings.PROCTOR_RERUN_RATE} per user "
        f"(PROCTOR_RERUN_RATE), try again in {seconds} second{'s' if seconds != 1 else ''}."
    )


class RerunThrottledMixin:
    """For API viewsets whose rerun actions use RerunRateThrottle: the 429 says it in one
    sentence (DRF's default adds a second) and keeps the Retry-After header."""

    def throttled(self, request, wait: float | None) -> None:
        exc = Throttled(detail=too_many_reruns(wait))
        exc.wait = wait
        raise exc


def rerun_rate_limited(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A dashboard rerun view under the same per-user limit as the API: over it, a 429 with
    one sentence and Retry-After, and nothing is started."""

    @wraps(view)
    def limited(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        throttle = RerunRateThrottle()
        if not throttle.allow_request(request, None):
            wait = throttle.wait()
            response = HttpResponse(
                too_many_reruns(wait), status=429, content_type="text/plain; charset=utf-8"
            )
            response["Retry-After"] = str(max(1, math.ceil(wait or 0)))
            return response
        return view(request, *args, **kwargs)

    return limited
