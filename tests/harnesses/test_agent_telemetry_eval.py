"""The agent CLIs' own OpenTelemetry, end to end through `proctor eval`: the real Claude Code
and Codex CLIs, pointed at their fake model APIs, send their telemetry to the trial's receiver.

A finished turn's stream already reports its usage (and Claude Code its cost): the telemetry
adds only the request and tool durations, and nothing is counted twice. A turn cut off by its
time limit never prints its result line: the usage (and Claude Code's cost) of the model
calls it made reaches the transcript from the telemetry alone, marked ``source: "otlp"``. The
raw exports are the trial's ``otlp/*.jsonl`` artifacts."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from e2e.running import Backend, trial_folder, write_eval
from fakes.anthropic_api import USAGE_PER_CALL as CLAUDE_USAGE
from fakes.anthropic_api import FakeAnthropicServer, tool_use
from fakes.gemini_api import MODEL as GEMINI_MODEL
from fakes.gemini_api import USAGE_PER_CALL as GEMINI_USAGE
from fakes.gemini_api import FakeGeminiServer
from fakes.gemini_api import shell as gemini_shell
from fakes.openai_responses import USAGE_PER_CALL as CODEX_USAGE
from fakes.openai_responses import FakeResponsesServer, shell

from harnesses.agent_cli_runs import require_cli
from harnesses.test_claude_code_and_codex_eval import ByCase, run_of, trial_id

EVAL = """
from proctor import case, command, profile, suite, variant

claude = variant("claude-code", model="claude-fake-1", name="claude", profile=profile("claude", env={{
    "ANTHROPIC_BASE_URL": {anthropic!r}, "ANTHROPIC_API_KEY": "test-key", "PATH": {claude_path!r}}}))
codex = variant("codex", model="gpt-fake-codex", name="codex", profile=profile("codex", env={{
    "OPENAI_BASE_URL": {openai!r}, "OPENAI_API_KEY": "test-key", "PATH": {codex_path!r}}}))
gemini = variant("gemini", model={gemini_model!r}, name="gemini", profile=profile("gemini", env={{
    "GOOGLE_GEMINI_BASE_URL": {gemini_url!r}, "GEMINI_API_KEY": "test-key", "PATH": {gemini_path!r}}}))

telemetry = suite(
    "telemetry",
    prompt="[case:{{{{case}}}}] Create hello.txt containing hi.",
    cases=[
        case("hello", variables={{"case": "hello"}}, validate=command("grep -qx hi hello.txt")),
        # The tool call outlives the time limit: the turn is cut off before its result line.
        case("cut-off", variables={{"case": "cut-off"}}, timeout_ms=25_000,
             validate=command("grep -qx hi hello.txt")),
    ],
    variants=[claude, codex],
)

# Gemini CLI sends its telemetry as OTLP JSON.
gemini_telemetry = suite(
    "telemetry-gemini",
    prompt="[case:hello] Create hello.txt containing hi.",
    cases=[case("gemini-hello", validate=command("grep -qx hi hello.txt"))],
    variants=[gemini],
)
"""


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> Iterator[tuple[Backend, dict[str, Any]]]:
    from conftest import proctor_env

    claude_path, codex_path = require_cli("claude"), require_cli("codex")
    gemini_path = require_cli("gemini")
    with (
        FakeAnthropicServer() as anthropic,
        FakeResponsesServer() as openai,
        FakeGeminiServer() as gemini,
    ):
        claude = ByCase(
            {
                "hello": [tool_use("Bash", {"command": "echo hi > hello.txt"}), "Created it."],
                "cut-off": [tool_use("Bash", {"command": "sleep 120"})],
            }
        )
        codex = ByCase(
            {
                "hello": [shell("echo hi > hello.txt"), "Created it."],
                "cut-off": [shell("sleep 120")],
            }
        )
        anthropic.script(*[claude] * claude.size)
        openai.script(*[codex] * codex.size)
        gemini.script(gemini_shell("echo hi > hello.txt"), "Created it.")
        project = tmp_path_factory.mktemp("project")
        write_eval(
            project,
            "telemetry.eval.py",
            EVAL.format(
                anthropic=anthropic.root_url,
                openai=openai.url,
                claude_path=claude_path,
                codex_path=codex_path,
                gemini_url=gemini.base_url,
                gemini_model=GEMINI_MODEL,
                gemini_path=gemini_path,
            ),
        )
        backend = Backend("sqlite", proctor_env(tmp_path_factory.mktemp("proctor-home")))
        # Exit 1: the cut-off trials timed out.
        result = backend.eval(project, "--json", "-j", "2")
        assert result.returncode in (0, 1), result.stderr
        yield backend, json.loads(result.stdout)


def folded(backend: Backend, tid: int) -> list[tuple[str, dict[str, Any]]]:
    return [(kind, data) for kind, data in backend.events(tid) if data.get("source") == "otlp"]


@pytest.mark.parametrize(
    ("case", "variant", "output_per_call", "encoding"),
    [
        ("hello", "claude", CLAUDE_USAGE["output_tokens"], "protobuf"),
        ("hello", "codex", CODEX_USAGE["output_tokens"], "protobuf"),
        ("gemini-hello", "gemini", GEMINI_USAGE["candidatesTokenCount"], "json"),
    ],
)
def test_a_finished_turns_usage_is_the_streams_and_the_telemetry_adds_durations(
    batch, case, variant, output_per_call, encoding
):
    backend, report = batch
    trial = run_of(report, case, variant)["trials"][0]
    tid = trial_id(backend, report, case, variant)
    added = folded(backend, tid)
    logs = trial_folder(backend, report["batch"], tid) / "otlp" / "logs.jsonl"
    exports = [json.loads(line) for line in logs.read_text().splitlines()]

    assert trial["status"] == "passed", trial
    assert [kind for kind, _ in added] == ["Log"]
    # Two calls of the agent's (Gemini CLI also counts its routing side calls).
    assert re.match(r"telemetry: [2-9] model requests, \d+ ms", added[0][1]["text"])
    # Two model calls, each counted once: the stream's count, nothing added from telemetry.
    assert trial["usage"]["output_tokens"] == 2 * output_per_call
    assert {export["encoding"] for export in exports} == {encoding}


def test_claude_codes_cut_off_turn_shows_the_usage_and_cost_its_telemetry_reported(batch):
    backend, report = batch
    trial = run_of(report, "cut-off", "claude")["trials"][0]
    tid = trial_id(backend, report, "cut-off", "claude")
    usage = [data for kind, data in folded(backend, tid) if kind == "Usage"]
    per_call_input = sum(
        CLAUDE_USAGE[k]
        for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )

    assert trial["status"] == "timed_out", trial
    # The one model call before the cut-off, known only from the telemetry.
    assert len(usage) == 1
    assert usage[0]["input_tokens"] == per_call_input
    assert usage[0]["output_tokens"] == CLAUDE_USAGE["output_tokens"]
    assert usage[0]["cost_usd"] > 0
    assert trial["usage"]["input_tokens"] == per_call_input
    assert trial["cost_usd"] == pytest.approx(usage[0]["cost_usd"])


def test_codexs_cut_off_turn_shows_the_tokens_its_telemetry_reported(batch):
    backend, report = batch
    trial = run_of(report, "cut-off", "codex")["trials"][0]
    tid = trial_id(backend, report, "cut-off", "codex")
    usage = [data for kind, data in folded(backend, tid) if kind == "Usage"]

    assert trial["status"] == "timed_out", trial
    assert len(usage) == 1 and "cost_usd" not in usage[0]  # Codex sends no cost here
    assert usage[0]["input_tokens"] == CODEX_USAGE["input_tokens"]
    assert usage[0]["output_tokens"] == CODEX_USAGE["output_tokens"]
    assert trial["usage"]["output_tokens"] == CODEX_USAGE["output_tokens"]
