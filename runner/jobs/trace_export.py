"""Trials and batches as OpenTelemetry traces (issue 33): the spans, built from the record.

When an OTLP endpoint is set (``runner.jobs.otlp_pipeline``: the SDK's provider, queue and
exporter, and the settings it reads), each trial is sent once its final row is written, and
each batch once it closes. The spans are built from what the trial recorded (its row, turns,
events, checks and consultations, with their timestamps), so every way of running (embedded,
``-j N``, a Celery worker) and ``proctor export --otlp`` send the same trace:

- ``invoke_agent <agent>``: the trial, root of its own trace, linked to its batch's trace;
- ``turn <n>``: one user message and what the agent did until it answered;
- ``execute_tool <name>`` per tool call and ``command <program>`` per command, under their turn,
  each from the event before it (its best known start) to its own event;
- ``chat <model>`` per model call Proctor made itself (judges, responder, simulated user);
- one ``gen_ai.evaluation.result`` event per check on the root span.

Message content (prompts, answers, tool arguments and results, command lines and output) is
attached only with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``; everything sent
is the recorded text, redacted when recorded, and passed through the credential shapes again.

A batch is a trace of its own (``proctor batch <id>``, one span per run linking its trials).
Root span ids are derived from the record, so the batch links trials other processes sent.
Sending never fails a trial: ``trial_ended`` and ``batch_ended`` never raise.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from datetime import datetime
from typing import Any

from django.conf import settings

from evals_app.models import Batch, Check, Consultation, Event, Trial, Turn
from runner.core.redaction import Redactor
from runner.jobs import otlp_pipeline

CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# Text attributes are cut here: a backend is for looking, the record is Proctor's.
MAX_ATTRIBUTE_CHARS = 8_000
# Links per span: the SDK keeps 128 by default (OTEL_SPAN_LINK_COUNT_LIMIT).
LINKS_PER_SPAN = 128

# The provider a harness's agent talks to, when the model's name does not say.
_HARNESS_PROVIDERS = {
    "claude-code": "anthropic",
    "codex": "openai",
    "gemini": "gcp.gemini",
}
_MODEL_PROVIDERS = (
    ("claude", "anthropic"),
    ("gpt", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("gemini", "gcp.gemini"),
    ("mistral", "mistral_ai"),
    ("deepseek", "deepseek"),
)
_SHAPES = Redactor()
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_PROGRAM = re.compile(r"[\w.+-]+")


def captures_content() -> bool:
    return os.environ.get(CAPTURE_CONTENT_VARIABLE, "").strip().lower() == "true"


def trial_ended(trial_id: int) -> None:
    """Send the finished trial's trace, when export is on; never raises (a trial's record is
    written already, and export must not fail it)."""
    if not otlp_pipeline.enabled():
        return
    try:
        export_trial(Trial.objects.select_related(*TRIAL_RELATED).get(pk=trial_id))
    except Exception:
        otlp_pipeline.say_once(
            "trial", f"trial {trial_id} could not be exported as a trace", exc_info=True
        )


def batch_ended(batch_id: int) -> None:
    """Send the closed batch's trace, when export is on; never raises."""
    if not otlp_pipeline.enabled():
        return
    try:
        export_batch(Batch.objects.get(pk=batch_id))
    except Exception:
        otlp_pipeline.say_once(
            "batch", f"batch {batch_id} could not be exported as a trace", exc_info=True
        )


# --- building the spans ------------------------------------------------------------------------

TRIAL_RELATED = ("run__batch", "run__variant", "run__case_version__case")


def export_trial(trial: Trial) -> None:
    """Queue the trial's spans (reads its turns, tool and command events, checks and
    consultations: a few queries)."""
    pipeline = otlp_pipeline.current()
    from opentelemetry import trace  # only when exporting (see the module docstring)
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode

    tracer = pipeline.tracer
    content = captures_content()
    run = trial.run
    batch, variant, version = run.batch, run.variant, run.case_version
    start = trial.started_at or trial.queued_at
    end = max(trial.finished_at or start, start)
    agent = variant.harness
    model = variant.model or ""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "gen_ai.request.model": model,
        "gen_ai.provider.name": provider_name(model, agent),
        "gen_ai.conversation.id": trial.session_id or f"proctor-trial-{trial.pk}",
        # The trial's tokens are its turns' (gen_ai.usage.* there): a backend that sums a
        # trace's usage (Langfuse) would count them twice if the root said them again.
        "proctor.trial.input_tokens": trial.input_tokens,
        "proctor.trial.output_tokens": trial.output_tokens,
        "proctor.trial.cache_read_tokens": trial.cache_read_tokens,
        "proctor.trial.cache_write_tokens": trial.cache_write_tokens,
        "proctor.batch.id": batch.pk,
        "proctor.run.id": run.pk,
        "proctor.case.name": version.case.slug,
        "proctor.case.version": version.number,
        "proctor.variant.name": variant.name,
        "proctor.variant.id": variant.pk,
        "proctor.sandbox": variant.sandbox,
        "proctor.trial.id": trial.pk,
        "proctor.trial.index": trial.index,
        "proctor.trial.attempt": trial.attempt,
        "proctor.trial.status": trial.status,
        "proctor.trial.finish_reason": trial.finish_reason,
        "proctor.trial.url": f"{settings.PROCTOR_DASHBOARD_URL}/trials/{trial.pk}/",
        "proctor.trial.score": trial.score,
        "proctor.trial.cost_usd": trial.cost_usd,
        "proctor.trial.duration_ms": trial.duration_ms,
    }
    if content and trial.answer:
        attributes["gen_ai.output.messages"] = _messages([("assistant", trial.answer)])
    trace_id, span_id = trial_span_ids(batch, trial.pk, trial.attempt)
    batch_link = Link(_context(*batch_span_ids(batch)))
    with pipeline.ids.fixed(trace_id, span_id):
        root = tracer.start_span(
            f"invoke_agent {agent}",
            kind=SpanKind.INTERNAL,
            start_time=_ns(start),
            attributes=_clean(attributes),
            links=[batch_link],
        )
    if trial.status in (Trial.Status.ERRORED, Trial.Status.TIMED_OUT):
        root.set_status(Status(StatusCode.ERROR, _text(trial.error or trial.status)))
    in_root = trace.set_span_in_context(root)

    turns = _turn_spans(tracer, trial, in_root, start, end, model, content)
    _event_spans(tracer, trial, turns, in_root, start, end, content)
    _consultation_spans(tracer, trial, in_root, start, end, content)
    for check in Check.objects.filter(trial_id=trial.pk).order_by("index"):
        root.add_event(
            "gen_ai.evaluation.result",
            attributes=_clean(_evaluation(check)),
            timestamp=_ns(end),
        )
    for span, _, turn_end in turns.values():
        span.end(end_time=_ns(turn_end))
    root.end(end_time=_ns(end))


def _turn_spans(tracer, trial, in_root, start, end, model, content) -> dict[int, tuple]:
    """Each turn's span, started (ended by the caller, after its children): by turn index, with
    its start and end."""
    spans: dict[int, tuple] = {}
    for turn in Turn.objects.filter(trial_id=trial.pk).order_by("index"):
        turn_start = _within(turn.started_at, start, end)
        turn_end = _within(turn.finished_at or end, turn_start, end)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.usage.input_tokens": turn.input_tokens,
            "gen_ai.usage.output_tokens": turn.output_tokens,
            "proctor.turn.index": turn.index,
            "proctor.turn.mode": turn.mode,
            "proctor.turn.origin": next(iter(turn.origin), "author") if turn.origin else "author",
        }
        if content:
            attributes["gen_ai.input.messages"] = _messages([("user", turn.prompt)])
            if turn.answer:
                attributes["gen_ai.output.messages"] = _messages([("assistant", turn.answer)])
        span = tracer.start_span(
            f"turn {turn.index + 1}",
            context=in_root,
            start_time=_ns(turn_start),
            attributes=_clean(attributes),
        )
        spans[turn.index] = (span, turn_start, turn_end)
    return spans


def _event_spans(tracer, trial, turns, in_root, start, end, content) -> None:
    """A span per tool call and per command, under its turn (the root when the turn is not
    recorded), from the event before it to its own."""
    from opentelemetry import trace  # only when exporting
    from opentelemetry.trace import Status, StatusCode

    kinds = (Event.Kind.TOOL_CALL, Event.Kind.COMMAND, Event.Kind.MESSAGE, Event.Kind.STARTED)
    rows = (
        Event.objects.filter(trial_id=trial.pk, kind__in=kinds)
        .order_by("seq")
        .values_list("turn_index", "kind", "at", "data")
    )
    previous: dict[int, datetime] = {}
    contexts: dict[int, Any] = {}
    for turn_index, kind, at, data in rows.iterator(chunk_size=2_000):
        turn = turns.get(turn_index)
        low, high = (turn[1], turn[2]) if turn else (start, end)
        event_end = _within(at, low, high)
        event_start = _within(previous.get(turn_index, low), low, event_end)
        previous[turn_index] = event_end
        if kind not in (Event.Kind.TOOL_CALL, Event.Kind.COMMAND) or not isinstance(data, dict):
            continue
        if turn_index not in contexts:
            contexts[turn_index] = trace.set_span_in_context(turn[0]) if turn else in_root
        if kind == Event.Kind.TOOL_CALL:
            name = str(data.get("name") or "tool")
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": data.get("call_id"),
                "gen_ai.tool.type": "function",
                "proctor.tool.status": data.get("status"),
            }
            if content:
                attributes["gen_ai.tool.call.arguments"] = data.get("input")
                attributes["gen_ai.tool.call.result"] = data.get("output")
            span_name = f"execute_tool {name}"
            failed = data.get("error")
        else:
            attributes = {
                "proctor.command.exit_code": data.get("exit_code"),
                "proctor.command.origin": data.get("origin"),
            }
            if content:
                attributes["proctor.command.line"] = data.get("command")
                attributes["proctor.command.output"] = data.get("output")
            span_name = f"command {_program(data.get('command'))}".strip()
            failed = None
        span = tracer.start_span(
            span_name,
            context=contexts[turn_index],
            start_time=_ns(event_start),
            attributes=_clean(attributes),
        )
        if failed:
            span.set_status(Status(StatusCode.ERROR, _text(failed) if content else "tool error"))
            span.set_attribute("error.type", "tool_error")
        span.end(end_time=_ns(event_end))


def _consultation_spans(tracer, trial, in_root, start, end, content) -> None:
    """A ``chat`` span per model call Proctor made (judges, responder, simulated user)."""
    from datetime import timedelta

    from opentelemetry.trace import SpanKind, Status, StatusCode

    for consultation in Consultation.objects.filter(trial_id=trial.pk).order_by("created_at", "id"):
        call_end = _within(consultation.created_at, start, end)
        call_start = _within(
            call_end - timedelta(milliseconds=consultation.duration_ms), start, call_end
        )
        usage = consultation.usage or {}
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": consultation.model,
            "gen_ai.provider.name": provider_name(consultation.model, ""),
            "gen_ai.usage.input_tokens": _int(usage.get("input_tokens")),
            "gen_ai.usage.output_tokens": _int(usage.get("output_tokens")),
            "proctor.consultation.kind": consultation.kind,
            "proctor.consultation.verdict": consultation.verdict,
            "proctor.consultation.turn_index": consultation.turn_index,
            "proctor.consultation.check_index": consultation.check_index,
        }
        if content:
            prompt = consultation.prompt if isinstance(consultation.prompt, list) else []
            attributes["gen_ai.input.messages"] = _messages(
                [
                    (str(m.get("role", "user")), m.get("content"))
                    for m in prompt
                    if isinstance(m, dict)
                ]
            )
            attributes["gen_ai.output.messages"] = _messages([("assistant", consultation.answer)])
        span = tracer.start_span(
            f"chat {consultation.model}".strip(),
            context=in_root,
            kind=SpanKind.CLIENT,
            start_time=_ns(call_start),
            attributes=_clean(attributes),
        )
        if consultation.cause:
            span.set_attribute("error.type", consultation.cause)
            span.set_status(Status(StatusCode.ERROR, consultation.cause))
        span.end(end_time=_ns(call_end))


def _evaluation(check: Check) -> dict[str, Any]:
    """A check as the ``gen_ai.evaluation.result`` event's attributes."""
    score = check.score if check.score is not None else (1.0 if check.passed else 0.0)
    return {
        "gen_ai.evaluation.name": check.name,
        "gen_ai.evaluation.score.value": float(score),
        "gen_ai.evaluation.score.label": "pass" if check.passed else "fail",
        "gen_ai.evaluation.explanation": check.message,
        "proctor.check.index": check.index,
        "proctor.check.kind": check.kind,
        "proctor.check.weight": check.weight,
        "proctor.check.metric": check.metric,
    }


def export_batch(batch: Batch) -> None:
    """Queue the batch's trace: its span, and per run one span linking the run's trials (more
    than one when a run has more trials than a span keeps links)."""
    pipeline = otlp_pipeline.current()
    from opentelemetry import trace  # only when exporting
    from opentelemetry.trace import Link

    tracer = pipeline.tracer
    start = batch.created_at
    end = max(batch.finished_at or start, start)
    trace_id, span_id = batch_span_ids(batch)
    with pipeline.ids.fixed(trace_id, span_id):
        root = tracer.start_span(
            f"proctor batch {batch.pk}",
            start_time=_ns(start),
            attributes=_clean(
                {
                    "gen_ai.operation.name": "invoke_workflow",
                    "proctor.batch.id": batch.pk,
                    "proctor.batch.label": batch.label,
                    "proctor.batch.status": batch.status,
                    "proctor.batch.url": f"{settings.PROCTOR_DASHBOARD_URL}/batches/{batch.pk}/",
                }
            ),
        )
    in_root = trace.set_span_in_context(root)
    runs = batch.runs.select_related("variant", "case_version__case").order_by("pk")
    for run in runs:
        trials = list(run.trials.order_by("index").values_list("pk", "attempt", "status"))
        for first in range(0, max(len(trials), 1), LINKS_PER_SPAN):
            chunk = trials[first : first + LINKS_PER_SPAN]
            links = [
                Link(_context(*trial_span_ids(batch, pk, attempt)), {"proctor.trial.id": pk})
                for pk, attempt, _ in chunk
            ]
            span = tracer.start_span(
                f"run {run.case_version.case.slug} × {run.variant.name}",
                context=in_root,
                start_time=_ns(start),
                links=links,
                attributes=_clean(
                    {
                        "proctor.run.id": run.pk,
                        "proctor.case.name": run.case_version.case.slug,
                        "proctor.case.version": run.case_version.number,
                        "proctor.variant.name": run.variant.name,
                        "proctor.variant.harness": run.variant.harness,
                        "proctor.variant.model": run.variant.model,
                        "proctor.run.trials_passed": sum(s == "passed" for *_, s in chunk),
                        "proctor.run.trials": len(chunk),
                        # The links as text too: some backends (Phoenix) do not show links.
                        "proctor.trial.trace_ids": [
                            f"{link.context.trace_id:032x}" for link in links
                        ],
                    }
                ),
            )
            span.end(end_time=_ns(end))
    root.end(end_time=_ns(end))


# --- ids, derived from the record ---------------------------------------------------------------


def _ids(text: str) -> tuple[int, int]:
    digest = hashlib.sha256(text.encode()).digest()
    # Never zero (an invalid id): the lowest bit is set.
    return int.from_bytes(digest[:16], "big") | 1, int.from_bytes(digest[16:24], "big") | 1


def trial_span_ids(batch: Batch, trial_id: int, attempt: int) -> tuple[int, int]:
    """The trace id and root span id of a trial's trace: the same in every process, so its
    batch can link to it. The batch's creation time keeps two installations' ids apart."""
    return _ids(f"proctor trial {batch.created_at.isoformat()} {batch.pk} {trial_id} {attempt}")


def batch_span_ids(batch: Batch) -> tuple[int, int]:
    return _ids(f"proctor batch {batch.created_at.isoformat()} {batch.pk}")


def _context(trace_id: int, span_id: int):
    from opentelemetry.trace import SpanContext, TraceFlags  # only when exporting

    return SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
    )


# --- values --------------------------------------------------------------------------------------


def provider_name(model: str, harness: str) -> str:
    """``gen_ai.provider.name``: from the model's ``provider/`` prefix or its name, else the
    harness's provider; ``_OTHER`` when neither says."""
    lowered = (model or "").lower()
    if "/" in lowered:
        return lowered.split("/", 1)[0]
    for prefix, provider in _MODEL_PROVIDERS:
        if lowered.startswith(prefix):
            return provider
    return _HARNESS_PROVIDERS.get(harness, "_OTHER")


def _program(command: object) -> str:
    """The program a command line runs, for the span's name (its arguments are content)."""
    if not isinstance(command, str) or not command.strip():
        return ""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    # Past leading assignments (NAME=value); a word that is no plain name is not shown.
    words = [word for word in words if not _ASSIGNMENT.match(word)][:1]
    program = os.path.basename(words[0]) if words else ""
    return program[:40] if _PROGRAM.fullmatch(program) else ""


def _messages(pairs: list[tuple[str, Any]]) -> str:
    """Messages in the GenAI conventions' JSON form (role, text parts)."""
    return json.dumps(
        [
            {"role": role, "parts": [{"type": "text", "content": _text(content)}]}
            for role, content in pairs
        ],
        ensure_ascii=False,
    )


def _text(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return _SHAPES.redact(text[:MAX_ATTRIBUTE_CHARS])


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    """Attributes as OpenTelemetry takes them: no None, text capped and redacted again."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, bool | int | float):
            out[key] = value
        elif isinstance(value, list):
            out[key] = [_text(item) for item in value]
        else:
            out[key] = _text(value)
    return out


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


def _within(moment: datetime | None, low: datetime, high: datetime) -> datetime:
    if moment is None:
        return low
    return min(max(moment, low), high)
