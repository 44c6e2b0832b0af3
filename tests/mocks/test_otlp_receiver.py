"""The trial's OTLP/HTTP receiver: what the official OpenTelemetry SDK's exporters send
arrives decoded, a body that is not OTLP answers 400 and the receiver goes on, a process in
every sandbox kind reaches it (bridged with the network off), and what arrived is kept as the
trial's ``otlp/<signal>.jsonl`` artifacts. How it is folded into a turn: test_agent_telemetry."""

from __future__ import annotations

import json

import httpx
import pytest
from opentelemetry._logs import LogRecord
from opentelemetry.exporter.otlp.proto.common._internal._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from sandboxes.conftest import open_sandbox  # noqa: F401

from runner.core.reporting import MemoryRecorder
from runner.mocks import start_mocks, stop_mocks, trial_telemetry
from runner.sandboxes.local import LocalSandbox

RESOURCE = Resource.create({"service.name": "claude-code"})
API_REQUEST = {
    "event.name": "api_request",
    "model": "claude-fake-1",
    "input_tokens": 100,
    "output_tokens": 15,
    "cost_usd": 0.0125,
    "duration_ms": 40,
}


@pytest.fixture
def receiving():
    """A local sandbox with a receiver and no mocks, as a trial of a CLI that exports."""
    box = LocalSandbox()
    started = start_mocks([], box, otlp_receiver=True)
    assert started is not None and started.access.otlp_url
    yield box, started.access.otlp_url
    stop_mocks(box)
    box.destroy()


def send_with_the_sdk(url: str) -> str:
    """A span, a counter and an event, each sent by the SDK's own OTLP/HTTP exporter (the
    span gzipped); returns the span's trace id in hex."""
    tracer_provider = TracerProvider(resource=RESOURCE)
    tracer_provider.add_span_processor(
        SimpleSpanProcessor(
            OTLPSpanExporter(endpoint=f"{url}/v1/traces", compression=Compression.Gzip)
        )
    )
    with tracer_provider.get_tracer("agent").start_as_current_span("claude_code.interaction") as s:
        trace_id = format(s.get_span_context().trace_id, "032x")
    tracer_provider.shutdown()

    reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=f"{url}/v1/metrics"), export_interval_millis=60_000
    )
    meter_provider = MeterProvider(resource=RESOURCE, metric_readers=[reader])
    meter_provider.get_meter("agent").create_counter("claude_code.cost.usage", unit="USD").add(
        0.0125, {"model": "claude-fake-1"}
    )
    meter_provider.shutdown()  # exports what it holds

    logger_provider = LoggerProvider(resource=RESOURCE)
    logger_provider.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"{url}/v1/logs"))
    )
    logger_provider.get_logger("com.anthropic.claude_code.events").emit(
        LogRecord(body="claude_code.api_request", attributes=API_REQUEST)
    )
    logger_provider.shutdown()
    return trace_id


def attributes_of(record: dict) -> dict:
    return {a["key"]: next(iter(a["value"].values())) for a in record["attributes"]}


def test_it_takes_what_the_sdks_exporters_send(receiving):
    box, url = receiving
    trace_id = send_with_the_sdk(url)
    exports = trial_telemetry(box).exports()

    assert [(e.signal, e.encoding) for e in exports] == [
        ("traces", "protobuf"),
        ("metrics", "protobuf"),
        ("logs", "protobuf"),
    ]
    span = exports[0].payload["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert span["name"] == "claude_code.interaction"
    assert span["traceId"] == trace_id  # hex, as OTLP JSON writes it
    metric = exports[1].payload["resourceMetrics"][0]["scopeMetrics"][0]["metrics"][0]
    assert metric["name"] == "claude_code.cost.usage"
    assert metric["sum"]["dataPoints"][0]["asDouble"] == 0.0125
    record = exports[2].payload["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    assert record["body"] == {"stringValue": "claude_code.api_request"}
    assert attributes_of(record)["input_tokens"] == "100"  # int64 as a string, per OTLP JSON
    assert attributes_of(record)["cost_usd"] == 0.0125


def test_a_body_that_is_not_otlp_answers_400_and_the_receiver_goes_on(receiving):
    box, url = receiving
    answers = [
        httpx.post(f"{url}/v1/logs", content=b"\x00garbage\xff", headers=headers)
        for headers in (
            {"content-type": "application/x-protobuf"},
            {"content-type": "application/json"},
            {"content-type": "text/plain"},
            {"content-type": "application/x-protobuf", "content-encoding": "gzip"},
        )
    ]
    wrong_path = httpx.post(f"{url}/v1/profiles", content=b"", timeout=10)
    send_with_the_sdk(url)

    assert [a.status_code for a in answers] == [400, 400, 400, 400]
    assert answers[0].text == "the body is not a protobuf OTLP logs request"
    assert answers[2].text.startswith("content-type 'text/plain' is not OTLP's")
    assert wrong_path.status_code == 404
    assert len(trial_telemetry(box).exports()) == 3  # what came after was still taken
    assert trial_telemetry(box).refused == 5


def test_what_arrived_is_kept_as_the_trials_artifacts(receiving):
    box, url = receiving
    trace_id = send_with_the_sdk(url)
    recorder = MemoryRecorder()
    stop_mocks(box, recorder)

    assert sorted(recorder.artifacts) == [
        "otlp/logs.jsonl",
        "otlp/metrics.jsonl",
        "otlp/traces.jsonl",
    ]
    traces = [json.loads(line) for line in recorder.artifacts["otlp/traces.jsonl"].splitlines()]
    assert traces[0]["signal"] == "traces" and traces[0]["encoding"] == "protobuf"
    assert trace_id in recorder.artifacts["otlp/traces.jsonl"]
    (logs,) = [json.loads(line) for line in recorder.artifacts["otlp/logs.jsonl"].splitlines()]
    resource = logs["payload"]["resourceLogs"][0]
    # Attributes as plain objects, their names kept through the trial's redaction.
    assert resource["resource"]["attributes"]["service.name"] == "claude-code"
    assert resource["scopeLogs"][0]["logRecords"][0]["attributes"] == API_REQUEST
    assert "OpenTelemetry from the agent: 3 export(s)" in recorder.logs


def sdk_encoded_logs() -> bytes:
    """An export request's body exactly as the SDK's log exporter encodes it."""
    memory = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=RESOURCE)
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    provider.get_logger("agent").emit(
        LogRecord(body="claude_code.api_request", attributes=API_REQUEST)
    )
    provider.shutdown()
    return encode_logs(memory.get_finished_logs()).SerializeToString()


# Runs inside the sandbox with its own python3: the SDK's body, then garbage.
POST = r"""
import os, sys, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
def post(body):
    request = urllib.request.Request(os.environ["OTLP_URL"] + "/v1/logs", data=body,
        headers={"Content-Type": "application/x-protobuf"})
    try:
        return opener.open(request, timeout=10).status
    except urllib.error.HTTPError as error:
        return error.code
print(post(open(sys.argv[1], "rb").read()), post(b"not otlp"))
"""


@pytest.mark.parametrize(
    ("kind", "network"),
    [
        ("local", True),
        ("bwrap", True),
        ("bwrap", False),
        pytest.param("docker", True, marks=pytest.mark.docker),
        pytest.param("docker", False, marks=pytest.mark.docker),
    ],
)
def test_a_process_in_every_sandbox_reaches_the_receiver(
    kind,
    network,
    open_sandbox,  # noqa: F811
):
    box = open_sandbox(kind, network=network)
    started = start_mocks([], box, otlp_receiver=True)
    assert started is not None and started.access.otlp_url
    try:
        box.write_text("body.bin", "")
        (box.host_workspace / "body.bin").write_bytes(sdk_encoded_logs())
        result = box.run(
            ["python3", "-c", POST, "body.bin"],
            env={"OTLP_URL": started.access.otlp_url},
            timeout_s=60,
        )
        exports = trial_telemetry(box).exports()
    finally:
        stop_mocks(box)

    assert result.exit_code == 0, result.output
    assert result.stdout.split() == ["200", "400"]
    assert [e.signal for e in exports] == ["logs"]
