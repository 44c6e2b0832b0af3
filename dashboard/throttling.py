"""How many reruns a user may start: PROCTOR_RERUN_RATE (default 30 a minute), counted once
across the dashboard's rerun buttons and the API's rerun actions, per user, and across every
web process: the count lives in the deployment's cache (Redis in the scaled mode, where several
web processes share it), in a window of the rate's period, added to atomically (``incr``), so
two processes counting at once never both take the last rerun.

A cache that cannot be reached (Redis down) lets the rerun through with a warning in the log:
its trials wait in the outbox for Redis anyway (``runner.jobs.dispatch``), and refusing would
turn an outage of the limit's store into an outage of reruns.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from rest_framework.exceptions import Throttled
from rest_framework.throttling import BaseThrottle

log = logging.getLogger(__name__)


# The period's first letter (as DRF reads a rate: "30/minute", "5/h"), in seconds.
PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _parsed_rate() -> tuple[int, int]:
    """PROCTOR_RERUN_RATE (checked at start-up) as (reruns, period in seconds)."""
    count, period = settings.PROCTOR_RERUN_RATE.split("/")
    return int(count), PERIODS[period[0]]


class RerunRateThrottle(BaseThrottle):
    """A per-user count of reruns in fixed windows of the rate's period, shared by every
    process that shares the cache."""

    scope = "reruns"

    def __init__(self) -> None:
        self._wait: float | None = None

    def allow_request(self, request, view) -> bool:
        allowed, duration = _parsed_rate()
        user = request.user
        who = user.pk if user.is_authenticated else self.get_ident(request)
        now = time.time()
        window = int(now // duration)
        key = f"throttle_reruns_{who}_{window}"
        try:
            cache.add(key, 0, timeout=duration + 1)
            count = cache.incr(key)
        except Exception as exc:  # the cache's server is down (redis-py's ConnectionError)
            log.warning("the rerun limit's cache is unreachable (%s): rerun allowed", exc)
            return True
        if count <= allowed:
            return True
        self._wait = (window + 1) * duration - now
        return False

    def wait(self) -> float | None:
        return self._wait


def retry_after_s(wait: float | None) -> int:
    """The seconds to wait before the next rerun is allowed, whole and at least one."""
    return max(1, math.ceil(wait or 0))


def too_many_reruns(wait: float | None) -> str:
    seconds = retry_after_s(wait)
    return (
        f"Too many reruns: at most {settings.PROCTOR_RERUN_RATE} per user "
        f"(PROCTOR_RERUN_RATE), try again in {seconds} second{'s' if seconds != 1 else ''}."
    )


class RerunThrottledMixin:
    """For API viewsets whose rerun actions use RerunRateThrottle: the 429 says it in one
    sentence (DRF's default adds a second) and keeps the Retry-After header."""

    def throttled(self, request, wait: float | None) -> None:
        exc = Throttled(detail=too_many_reruns(wait))
        # Whole seconds, rounded up as the sentence says them: DRF writes the header with "%d",
        # and a window ending in 0.4 s made it "Retry-After: 0", an invitation to be refused.
        exc.wait = retry_after_s(wait)
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
            response["Retry-After"] = str(retry_after_s(wait))
            return response
        return view(request, *args, **kwargs)

    return limited
