"""The trial's OTLP/HTTP receiver: where an agent CLI that exports OpenTelemetry sends its own
traces, metrics and logs while the trial runs.

It is served like a mock (``runner.mocks.server``: a loopback port and a unix socket, bridged
into a sandbox with the network off) and answers ``POST /v1/traces``, ``/v1/metrics`` and
``/v1/logs`` in protobuf (``application/x-protobuf``) or JSON (``application/json``), gzip or
not, as the OTLP/HTTP specification says. Each request is decoded with the official
``opentelemetry-proto`` messages and kept as its OTLP JSON form (trace and span ids in hex), in
arrival order; a body that is not OTLP answers 400 with one sentence, and the trial goes on.
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
import time
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runner.mocks.api import read_body, send_answer

if TYPE_CHECKING:  # protobuf is imported when a request arrives, not with the module
    from google.protobuf.message import Message

# The largest body kept; a CLI's export batch is a few kilobytes.
MAX_BODY_BYTES = 8 * 1024 * 1024
# The fields OTLP JSON writes as hex, which protobuf's own JSON mapping writes as base64.
HEX_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _service_messages(signal: str) -> tuple[type[Message], type[Message]]:
    """The request and response messages of ``signal``'s collector service."""
    # Imported here: only a trial whose agent exports telemetry loads the generated modules.
    if signal == "traces":
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as traces

        return traces.ExportTraceServiceRequest, traces.ExportTraceServiceResponse
    if signal == "metrics":
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as metrics

        return metrics.ExportMetricsServiceRequest, metrics.ExportMetricsServiceResponse
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2 as logs

    return logs.ExportLogsServiceRequest, logs.ExportLogsServiceResponse


SIGNAL_PATHS = {"/v1/traces": "traces", "/v1/metrics": "metrics", "/v1/logs": "logs"}


class OtlpBodyError(ValueError):
    """A request body that is not an OTLP export request; the message is the 400's text."""


@dataclass(frozen=True)
class OtlpExport:
    """One export request as it arrived: its signal, when (ms since the epoch), the encoding
    it came in, and its OTLP JSON form."""

    signal: str
    at_ms: int
    encoding: str  # "protobuf" | "json"
    payload: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The export as its artifact line keeps it: the payload with each ``attributes`` list
        written as an object of plain values (``{"model": "gpt-5"}``, not ``[{"key": "model",
        "value": {"stringValue": "gpt-5"}}]``): easier to read, and a ``"key"`` field would
        look like a credential to the trial's redaction, which would hide every name."""
        return {
            "signal": self.signal,
            "at": self.at_ms,
            "encoding": self.encoding,
            "payload": _readable(self.payload),
        }


def plain_value(value: dict[str, Any]) -> Any:
    """An OTLP JSON ``AnyValue`` as a plain value (64-bit integers arrive as strings)."""
    for key in ("stringValue", "boolValue", "doubleValue", "bytesValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])
    if "arrayValue" in value:
        return [plain_value(item) for item in value["arrayValue"].get("values") or []]
    if "kvlistValue" in value:
        return plain_attributes(value["kvlistValue"].get("values") or [])
    return None


def plain_attributes(attributes: list[dict[str, Any]]) -> dict[str, Any]:
    """An OTLP JSON attribute list as an object of plain values."""
    return {item.get("key", ""): plain_value(item.get("value") or {}) for item in attributes}


def _readable(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: plain_attributes(item)
            if key == "attributes" and isinstance(item, list)
            else _readable(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_readable(item) for item in value]
    return value


def _ids_between(value: Any, convert) -> Any:  # type: ignore[no-untyped-def]
    """``value`` with every trace and span id field passed through ``convert``."""
    if isinstance(value, dict):
        return {
            key: convert(item)
            if key in HEX_ID_FIELDS and isinstance(item, str)
            else _ids_between(item, convert)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_ids_between(item, convert) for item in value]
    return value


def _hex_to_base64(text: str) -> str:
    try:
        return base64.b64encode(bytes.fromhex(text)).decode()
    except ValueError:
        raise OtlpBodyError(f"{text!r} is not a hex trace or span id") from None


def _base64_to_hex(text: str) -> str:
    return base64.b64decode(text).hex()


def _inflate(body: bytes, encoding: str) -> bytes:
    if encoding in ("", "identity"):
        return body
    try:
        if encoding == "gzip":
            return gzip.decompress(body)
        if encoding == "deflate":
            return zlib.decompress(body)
    except (OSError, EOFError, zlib.error):
        raise OtlpBodyError(f"the body is not valid {encoding}") from None
    raise OtlpBodyError(f"content-encoding {encoding!r} is not one OTLP uses (gzip)")


def decode_export(signal: str, body: bytes, content_type: str) -> tuple[str, Message]:
    """The export request of ``signal`` in ``body``, and the encoding it was in. Raises
    OtlpBodyError for anything else."""
    from google.protobuf import json_format
    from google.protobuf.message import DecodeError

    request_type, _ = _service_messages(signal)
    message = request_type()
    media = content_type.split(";")[0].strip().lower()
    if media == "application/x-protobuf":
        try:
            message.ParseFromString(body)
        except (DecodeError, RuntimeError, ValueError):
            raise OtlpBodyError(f"the body is not a protobuf OTLP {signal} request") from None
        return "protobuf", message
    if media == "application/json":
        try:
            document = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise OtlpBodyError("the body is not JSON") from None
        if not isinstance(document, dict):
            raise OtlpBodyError(f"the body is not an OTLP {signal} request (not a JSON object)")
        try:
            json_format.ParseDict(
                _ids_between(document, _hex_to_base64), message, ignore_unknown_fields=True
            )
        except json_format.ParseError as exc:
            raise OtlpBodyError(f"the body is not an OTLP {signal} request: {exc}") from None
        return "json", message
    raise OtlpBodyError(
        f"content-type {media or '(none)'!r} is not OTLP's (application/x-protobuf or application/json)"
    )


def export_json(message: Message) -> dict[str, Any]:
    """``message`` in OTLP JSON form: camelCase fields, ids in hex, 64-bit numbers as strings."""
    from google.protobuf import json_format

    return _ids_between(json_format.MessageToDict(message), _base64_to_hex)


class OtlpReceiver:
    """The ASGI app of one trial's receiver; ``exports`` holds what arrived, in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._exports: list[OtlpExport] = []
        self.refused = 0  # requests answered 400 (or another error)

    def exports(self, since: int = 0) -> list[OtlpExport]:
        """What arrived, from the ``since``-th export on."""
        with self._lock:
            return self._exports[since:]

    def take(self, export: OtlpExport) -> None:
        with self._lock:
            self._exports.append(export)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        signal = SIGNAL_PATHS.get(scope.get("path", "").rstrip("/"))
        if signal is None:
            self.refused += 1
            await _text(send, 404, "no such OTLP signal (POST /v1/traces, /v1/metrics or /v1/logs)")
            return
        if scope.get("method") != "POST":
            self.refused += 1
            await _text(send, 405, "OTLP export requests are POSTs")
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        body = await read_body(receive)
        if len(body) > MAX_BODY_BYTES:
            self.refused += 1
            await _text(send, 413, f"the body is over {MAX_BODY_BYTES} bytes")
            return
        try:
            inflated = _inflate(body, headers.get("content-encoding", "").strip().lower())
            encoding, message = decode_export(signal, inflated, headers.get("content-type", ""))
        except OtlpBodyError as exc:
            self.refused += 1
            await _text(send, 400, str(exc))
            return
        self.take(OtlpExport(signal, int(time.time() * 1000), encoding, export_json(message)))
        _, response_type = _service_messages(signal)
        if encoding == "protobuf":
            answer = response_type().SerializeToString()
            await send_answer(send, 200, answer, "application/x-protobuf", {})
        else:
            await send_answer(send, 200, b"{}", "application/json", {})


async def _text(send: Any, status: int, text: str) -> None:
    await send_answer(send, status, text.encode(), "text/plain; charset=utf-8", {})
