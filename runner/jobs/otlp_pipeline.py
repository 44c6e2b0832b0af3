"""This process's OpenTelemetry pipeline for the traces ``runner.jobs.trace_export`` builds:
the SDK's tracer provider, its bounded queue and background sender (``BatchSpanProcessor``),
the OTLP/HTTP exporter, the ids a root span is given, and the tally of spans not sent.

On when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set; the
SDK reads the other ``OTEL_*`` variables itself (headers, timeout, service name, sampler, the
queue's size), and the settings refuse a protocol other than ``http/protobuf``. OpenTelemetry
is imported only when the pipeline is made, so a process that sends nothing never loads it.
Made on first use in each process (a forked worker makes its own), and flushed at its exit,
which says once how many spans could not be sent.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
from collections.abc import Iterator

from django.conf import settings

log = logging.getLogger(__name__)

ENDPOINT_VARIABLES = settings.OTLP_ENDPOINT_VARIABLES
# How long the exit's flush may wait for the receiver.
FLUSH_TIMEOUT_MS = 5_000


def enabled() -> bool:
    """Whether traces are to be sent: an OTLP endpoint is set and the SDK is not disabled."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(os.environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


_said: set[str] = set()
_said_lock = threading.Lock()


def say_once(topic: str, message: str, *, exc_info: bool = False) -> None:
    """Log ``message`` as a warning the first time this process says something of ``topic``."""
    with _said_lock:
        if topic in _said:
            return
        _said.add(topic)
    log.warning("OpenTelemetry: %s", message, exc_info=exc_info)


class _Pipeline:
    """This process's tracer provider, its batch processor and the tallies of what was sent."""

    def __init__(self, tracer, provider, ids, tally) -> None:
        self.tracer = tracer
        self.provider = provider
        self.ids = ids
        self.tally = tally
        self.pid = os.getpid()


_current: _Pipeline | None = None
_current_lock = threading.Lock()


def current() -> _Pipeline:
    """The process's pipeline, made on first use (a forked child makes its own). The protocol
    is OTLP/HTTP with protobuf: the settings refuse any other."""
    global _current
    with _current_lock:
        if _current is not None and _current.pid == os.getpid():
            return _current
        _current = _start_pipeline()
        atexit.register(flush)
        return _current


def _start_pipeline() -> _Pipeline:
    # OpenTelemetry is imported only here: a process that exports nothing never loads it.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )
    from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

    class RecordIds(IdGenerator):
        """Random ids, except a root span's, which ``fixed`` derives from the record."""

        def __init__(self) -> None:
            self._random = RandomIdGenerator()
            self._fixed = threading.local()

        @contextlib.contextmanager
        def fixed(self, trace_id: int, span_id: int) -> Iterator[None]:
            self._fixed.ids = [trace_id, span_id]
            try:
                yield
            finally:
                self._fixed.ids = None

        def generate_trace_id(self) -> int:
            ids = getattr(self._fixed, "ids", None)
            return ids[0] if ids else self._random.generate_trace_id()

        def generate_span_id(self) -> int:
            ids = getattr(self._fixed, "ids", None)
            return ids[1] if ids else self._random.generate_span_id()

        def is_trace_id_random(self) -> bool:
            return True  # a hash's bits: sampling by ratio stays uniform

    class Tally:
        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.ended = self.sent = self.failed = 0

    tally = Tally()

    class CountingExporter(SpanExporter):
        def __init__(self, inner: SpanExporter) -> None:
            self.inner = inner

        def export(self, spans):
            result = self.inner.export(spans)
            with tally.lock:
                if result == SpanExportResult.SUCCESS:
                    tally.sent += len(spans)
                else:
                    tally.failed += len(spans)
            return result

        def shutdown(self) -> None:
            self.inner.shutdown()

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return self.inner.force_flush(timeout_millis)

    class CountingProcessor(SpanProcessor):
        def __init__(self, inner: SpanProcessor) -> None:
            self.inner = inner

        def on_start(self, span, parent_context=None) -> None:
            self.inner.on_start(span, parent_context=parent_context)

        def on_end(self, span) -> None:
            with tally.lock:
                tally.ended += 1
            self.inner.on_end(span)

        def shutdown(self) -> None:
            self.inner.shutdown()

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return self.inner.force_flush(timeout_millis)

    # The exporter's own complaints (one per failed batch) are summed up in one line instead.
    for name in ("opentelemetry.exporter.otlp.proto.http", "opentelemetry.sdk.trace.export"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "proctor"}))
    ids = RecordIds()
    provider = TracerProvider(resource=resource, id_generator=ids, shutdown_on_exit=False)
    provider.add_span_processor(
        CountingProcessor(BatchSpanProcessor(CountingExporter(OTLPSpanExporter())))
    )
    return _Pipeline(provider.get_tracer("proctor"), provider, ids, tally)


def endpoint() -> str:
    """The receiver's address, as set."""
    return next((os.environ[n] for n in ENDPOINT_VARIABLES if os.environ.get(n, "").strip()), "")


def flush() -> int:
    """Send what waits (at most FLUSH_TIMEOUT_MS), and say once how many spans were not sent;
    returns that number."""
    pipeline = _current
    if pipeline is None or pipeline.pid != os.getpid():
        return 0
    pipeline.provider.force_flush(FLUSH_TIMEOUT_MS)
    tally = pipeline.tally
    with tally.lock:
        lost = tally.ended - tally.sent
        ended, failed = tally.ended, tally.failed
    if lost > 0:
        say_once(
            "dropped",
            f"{lost} of {ended} spans were not sent to {endpoint()} by process {os.getpid()} "
            f"({failed} refused or unreachable, the rest dropped from a full queue or still "
            "waiting)",
        )
    return lost
