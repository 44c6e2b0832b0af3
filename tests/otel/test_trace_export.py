"""Trials as OpenTelemetry traces (issue 33), through the real `proctor eval` and a real receiver:
Arize Phoenix gets the batch's traces over OTLP/HTTP and the tests read them back through its
API. A judge is played by the fake model server; the agent repeats prepare's secret and a text
marker in every event, so the trace can be searched for both."""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from pathlib import Path

import pytest
from conftest import free_port, proctor_env, run_proctor
from e2e.running import Backend, write_eval, write_quick_eval
from fakes.openai_server import FakeModelServer

from otel.phoenix import phoenix_spans

AGENTS = Path(__file__).resolve().parent / "agents"
JUDGE_MODEL = "gpt-fake-judge"
JUDGE_ANSWER = '{"passed": true, "score": 0.75, "reason": "the agent looked things up"}'
# The texts the agent and the case say: content, never sent unless asked for.
CONTENT_MARKERS = ("ARGUMENT-TEXT", "RESULT-TEXT", "OUTPUT-TEXT", "ANSWER-TEXT", "PROMPT-TEXT")

TRACED_EVAL = f"""
import os
import secrets

from proctor import Verdict, case, judge, profile, suite, turns, variant


def make_key(ctx):
    key = "tk_" + secrets.token_hex(16)
    with open(os.environ["SECRET_DROP"], "a") as drop:
        drop.write(key + "\\n")
    ctx.write_text(".prepared-secret", key)
    return {{"api_key": key}}


def kept_the_key(ctx):
    return Verdict(ctx.read_text(".prepared-secret") == ctx.prepared["api_key"], "kept")


s = suite("traced", prompt="PROMPT-TEXT look it up", trials=2,
          cases=[case("lookup", prepare=make_key, user=turns("PROMPT-TEXT once more"),
                      validate=[kept_the_key,
                                judge("the agent looked things up", name="looked-up")])],
          variants=[variant("command", model="claude-test", profile=profile(
              "traced", dir={str(AGENTS)!r}, run='bash "$PROCTOR_PROFILE_DIR/traced_agent.sh"',
              capabilities=["conversation-resume"]))])
"""


@pytest.fixture
def traced(tmp_path: Path, phoenix: str):
    """Run the traced eval with its traces sent to Phoenix under a project of its own; returns
    a function taking extra environment and giving (report, spans, secrets, result)."""

    def run(**extra_env: str):
        project = f"proctor-{uuid.uuid4().hex[:8]}"
        drop = tmp_path / "secrets.txt"
        write_eval(tmp_path / "project", "traced.eval.py", TRACED_EVAL)
        with FakeModelServer() as model:
            model.script(*[JUDGE_ANSWER] * 2)
            backend = Backend(
                "sqlite",
                proctor_env(
                    tmp_path / "home",
                    PROCTOR_LLM_BASE_URL=model.url,
                    PROCTOR_LLM_MODEL=JUDGE_MODEL,
                    SECRET_DROP=str(drop),
                    OTEL_EXPORTER_OTLP_ENDPOINT=phoenix,
                    OTEL_RESOURCE_ATTRIBUTES=f"openinference.project.name={project}",
                    **extra_env,
                ),
            )
            result = backend.eval(tmp_path / "project", "--json")
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        spans = phoenix_spans(
            phoenix,
            project,
            until=lambda spans: (
                sum(s["name"].startswith("invoke_agent") for s in spans) == 2
                and any(s["name"].startswith("proctor batch") for s in spans)
            ),
        )
        return report, spans, drop.read_text().split(), result

    return run


def children(spans: list[dict], parent: dict) -> list[dict]:
    return [s for s in spans if s["parent_id"] == parent["context"]["span_id"]]


def test_each_trial_arrives_as_a_tree_of_agent_turn_tool_command_and_chat_spans(traced):
    report, spans, secrets, _ = traced()

    roots = [s for s in spans if s["name"] == "invoke_agent command"]
    assert len(roots) == 2
    trial_ids = {t["id"] for run in report["runs"] for t in run["trials"]}
    assert {r["attributes"]["proctor.trial.id"] for r in roots} == trial_ids
    for root in roots:
        a = root["attributes"]
        assert root["parent_id"] is None
        assert a["gen_ai.operation.name"] == "invoke_agent"
        assert a["gen_ai.agent.name"] == "command"
        assert a["gen_ai.request.model"] == "claude-test"
        assert a["gen_ai.provider.name"] == "anthropic"
        assert a["gen_ai.conversation.id"] == "traced-session"
        assert a["proctor.batch.id"] == report["batch"]
        assert a["proctor.case.name"] == "lookup"
        assert a["proctor.variant.name"]
        assert a["proctor.trial.status"] == "passed"
        assert a["proctor.trial.url"].endswith(f"/trials/{a['proctor.trial.id']}/")
        assert a["proctor.trial.input_tokens"] == 240, "two turns of 120"
        assert "gen_ai.usage.input_tokens" not in a, "the turns say it: never counted twice"

        turns = sorted(children(spans, root), key=lambda s: s["name"])
        turns = [s for s in turns if s["name"].startswith("turn ")]
        assert [t["name"] for t in turns] == ["turn 1", "turn 2"]
        assert [t["attributes"]["gen_ai.usage.output_tokens"] for t in turns] == [30, 30]
        under_turn = Counter(
            s["name"]
            for s in children(spans, turns[0])
            if s["attributes"].get("proctor.command.origin") != "trace"
        )
        assert under_turn == {
            "execute_tool lookup": 1,
            "execute_tool write_file": 1,
            "command grep": 1,
        }
        traced_commands = [
            s["name"]
            for s in children(spans, turns[0])
            if s["attributes"].get("proctor.command.origin") == "trace"
        ]
        assert "command echo" in traced_commands, "what the shell recorder saw is there too"
        (lookup,) = [s for s in children(spans, turns[0]) if s["name"] == "execute_tool lookup"]
        assert lookup["attributes"]["gen_ai.tool.name"] == "lookup"
        assert lookup["attributes"]["gen_ai.tool.call.id"] == "call-7"
        assert lookup["attributes"]["gen_ai.operation.name"] == "execute_tool"
        (failed,) = [s for s in children(spans, turns[0]) if s["name"].endswith("write_file")]
        assert failed["status_code"] == "ERROR"
        (grep,) = [s for s in children(spans, turns[0]) if s["name"] == "command grep"]
        assert grep["attributes"]["proctor.command.exit_code"] == 1
        for child in children(spans, turns[0]):
            assert turns[0]["start_time"] <= child["start_time"] <= child["end_time"]
            assert child["end_time"] <= turns[0]["end_time"]

        (chat,) = [s for s in children(spans, root) if s["name"].startswith("chat")]
        assert chat["name"] == f"chat {JUDGE_MODEL}"
        assert chat["attributes"]["gen_ai.operation.name"] == "chat"
        assert chat["attributes"]["gen_ai.request.model"] == JUDGE_MODEL
        assert chat["attributes"]["gen_ai.provider.name"] == "openai"
        assert chat["attributes"]["gen_ai.usage.input_tokens"] == 11
        assert chat["attributes"]["gen_ai.usage.output_tokens"] == len(JUDGE_ANSWER.split())
        assert chat["attributes"]["proctor.consultation.kind"] == "judge"

        evaluations = [e for e in root["events"] if e["name"] == "gen_ai.evaluation.result"]
        assert [e["attributes"]["gen_ai.evaluation.name"] for e in evaluations] == [
            "kept_the_key",
            "looked-up",
        ]
        judged = evaluations[1]["attributes"]
        assert judged["gen_ai.evaluation.score.value"] == 0.75
        assert judged["gen_ai.evaluation.score.label"] == "pass"
        assert judged["gen_ai.evaluation.explanation"] == "the agent looked things up"

    (batch,) = [s for s in spans if s["name"] == f"proctor batch {report['batch']}"]
    (run,) = children(spans, batch)
    assert sorted(run["attributes"]["proctor.trial.trace_ids"]) == sorted(
        r["context"]["trace_id"] for r in roots
    ), "the batch's trace names (and links) each trial's trace"

    sent = json.dumps(spans)
    for secret in secrets:
        assert secret not in sent
    for marker in CONTENT_MARKERS:
        assert marker not in sent, f"{marker}: message content is sent only when asked for"


def test_message_content_is_sent_when_asked_for_and_redacted(traced):
    report, spans, secrets, _ = traced(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true")

    sent = json.dumps(spans)
    for marker in CONTENT_MARKERS:
        assert marker in sent
    for secret in secrets:
        assert secret not in sent
    assert "sk-live1234567890abcdefghij" not in sent, "key-shaped text is redacted too"
    turn = next(s for s in spans if s["name"] == "turn 1")
    (message,) = json.loads(turn["attributes"]["gen_ai.input.messages"])
    assert message == {
        "role": "user",
        "parts": [{"type": "text", "content": "PROMPT-TEXT look it up"}],
    }
    lookup = next(s for s in spans if s["name"] == "execute_tool lookup")
    assert lookup["attributes"]["gen_ai.tool.call.arguments"] == "ARGUMENT-TEXT [redacted]"
    chat = next(s for s in spans if s["name"].startswith("chat"))
    assert (
        json.loads(chat["attributes"]["gen_ai.output.messages"])[0]["parts"][0]["content"]
        == JUDGE_ANSWER
    )


def test_an_unreachable_receiver_never_fails_a_trial_and_is_said_once(tmp_path: Path):
    write_quick_eval(tmp_path / "project", trials=3)
    backend = Backend(
        "sqlite",
        proctor_env(
            tmp_path / "home",
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{free_port()}",
            OTEL_EXPORTER_OTLP_TIMEOUT="1",
        ),
    )

    result = backend.eval(tmp_path / "project", "--json", timeout=60)

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [t["status"] for t in report["runs"][0]["trials"]] == ["passed"] * 3
    said = re.findall(r"(\d+) of (\d+) spans were not sent .* by process (\d+)", result.stderr)
    assert said, result.stderr
    assert len({pid for *_, pid in said}) == len(said), "each process says it once"
    assert all(lost == ended for lost, ended, _ in said)
    # Each trial: its root, its turn and the command the shell recorder saw; the batch: its
    # span and its run's.
    assert sum(int(ended) for _, ended, _ in said) == 3 * 3 + 2


def test_without_an_endpoint_nothing_of_opentelemetry_is_imported(tmp_path: Path):
    write_quick_eval(tmp_path / "project")
    backend = Backend("sqlite", proctor_env(tmp_path / "home", PYTHONPROFILEIMPORTTIME="1"))

    result = backend.eval(tmp_path / "project", "--json")
    shown = backend.eval(tmp_path / "project", "--help")

    assert result.returncode == 0, result.stderr
    assert "runner.jobs.trace_export" in result.stderr, "the import times are shown"
    assert "opentelemetry" not in result.stderr
    assert "opentelemetry" not in shown.stderr


def test_a_finished_batch_is_sent_afterwards_by_export_otlp(tmp_path: Path, phoenix: str):
    project = f"proctor-{uuid.uuid4().hex[:8]}"
    write_quick_eval(tmp_path / "project", trials=2)
    env = proctor_env(tmp_path / "home")
    report = Backend("sqlite", env).eval_json(tmp_path / "project")
    otlp = {
        **env,
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix,
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
    }

    refused = run_proctor("export", str(report["batch"]), "--otlp", cwd=tmp_path, env=env)
    sent = run_proctor("export", str(report["batch"]), "--otlp", cwd=tmp_path, env=otlp)

    assert refused.returncode == 2
    assert "--otlp: set OTEL_EXPORTER_OTLP_ENDPOINT" in refused.stderr
    assert sent.returncode == 0, sent.stderr
    assert f"Sent 2 trials of batch {report['batch']} as traces to {phoenix}" in sent.stderr
    spans = phoenix_spans(
        phoenix,
        project,
        until=lambda spans: (
            sum(s["name"] == "invoke_agent command" for s in spans) == 2
            and any(s["name"].startswith("proctor batch") for s in spans)
        ),
    )
    roots = [s for s in spans if s["name"] == "invoke_agent command"]
    assert {r["attributes"]["proctor.trial.id"] for r in roots} == {
        t["id"] for t in report["runs"][0]["trials"]
    }


def test_a_protocol_proctor_cannot_send_ends_the_command_at_start_up(tmp_path: Path):
    write_quick_eval(tmp_path / "project")
    env = proctor_env(
        tmp_path / "home",
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4317",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
    )

    result = Backend("sqlite", env).eval(tmp_path / "project")

    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "proctor: OTEL_EXPORTER_OTLP_PROTOCOL is 'grpc', but Proctor sends traces as "
        "http/protobuf only: unset it and point OTEL_EXPORTER_OTLP_ENDPOINT at the receiver's "
        "OTLP/HTTP port (usually 4318)"
    ]
