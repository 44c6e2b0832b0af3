"""docs/wire-formats.md cannot drift from the code: every named example in it is read by the
parser that reads the real thing (the responder through a real ``PROCTOR_LLM_COMMAND``, the
judge's verdict reader, the command-harness protocol), and each agent CLI's documented settings
are the ones its harness module names."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from conftest import proctor_env, run_proctor

from proctor.protocol import parse_line
from runner.conversation.planning_writes import WROTE_WHILE_PLANNING
from runner.conversation.responder import consult
from runner.grading.judges import read_verdict
from runner.llm import LLMConfig
from runner.trial.session import DENIED_STATUSES

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "wire-formats.md").read_text(encoding="utf-8")
EXAMPLE = re.compile(r"^```(\w+) ([\w-]+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
EXAMPLES = {name: body.strip() for _lang, name, body in EXAMPLE.findall(DOC)}


def example(name: str) -> str:
    assert name in EXAMPLES, f"docs/wire-formats.md has no example named {name}"
    return EXAMPLES[name]


def responder_through_a_command(answer: str, tmp_path: Path):
    """The responder consulted through PROCTOR_LLM_COMMAND printing ``answer``; the command
    also keeps what it was sent."""
    (tmp_path / "answer.json").write_text(answer)
    command = f"cat > {shlex.quote(str(tmp_path / 'stdin.json'))}; cat {shlex.quote(str(tmp_path / 'answer.json'))}"
    return consult(
        LLMConfig(command=command, model="gpt-4.1-mini"),
        opening_prompt="Add caching.",
        earlier_replies=[],
        last_message="Memory or Redis? I recommend memory.",
        planning=False,
        turn_index=0,
    )


@pytest.mark.parametrize(
    ("name", "verdict", "cause"),
    [
        ("responder-answer", "answer", ""),
        ("responder-done", "done", ""),
        ("responder-cannot-answer", "cannot_answer", "declined"),
    ],
)
def test_the_documented_responder_verdicts_are_read_as_documented(
    tmp_path: Path, name: str, verdict: str, cause: str
) -> None:
    turn = responder_through_a_command(example(name), tmp_path)

    assert (turn.verdict, turn.cause) == (verdict, cause)
    assert turn.reason == json.loads(example(name))["reason"]
    if verdict == "answer":
        assert turn.reply == json.loads(example(name))["reply"]


def test_the_documented_command_stdin_has_the_shape_the_command_receives(tmp_path: Path) -> None:
    responder_through_a_command(example("responder-done"), tmp_path)
    received = json.loads((tmp_path / "stdin.json").read_text())
    documented = json.loads(example("llm-command-stdin"))

    assert set(received) == set(documented)
    assert {type(v) for v in received.values()} == {type(v) for v in documented.values()}
    assert received["json"] is True and received["model"] == "gpt-4.1-mini"
    assert [m["role"] for m in received["messages"]] == [m["role"] for m in documented["messages"]]
    assert all(set(m) == {"role", "content"} for m in received["messages"])


def test_the_documented_judge_answers_are_read_as_documented() -> None:
    assert read_verdict(example("judge-answer")) == (
        True,
        0.9,
        "the cache is added and the endpoint is unchanged",
    )
    # Without a score, it follows passed.
    assert read_verdict(example("judge-answer-without-score")) == (False, 0.0, "no cache was added")
    # The documented refusals.
    assert read_verdict('{"score": 1}') == "missing_verdict"
    assert read_verdict('{"passed": true, "score": 7}') == "malformed_verdict"


def test_the_documented_refused_write_is_a_denial_of_the_command_protocol() -> None:
    event = parse_line(example("command-refused-write"))

    assert event is not None and event.kind == "ToolCall"
    assert event.data["status"] in DENIED_STATUSES
    denial = json.loads(example("permission-denial"))
    assert (denial["tool"], denial["input"], denial["status"]) == (
        event.data["name"],
        event.data["input"],
        event.data["status"],
    )
    assert json.loads(example("wrote-while-planning"))["status"] == WROTE_WHILE_PLANNING


@pytest.mark.parametrize(
    ("harness", "settings"),
    [
        ("claude_code", ["ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"]),
        ("codex", ["OPENAI_BASE_URL", "OPENAI_API_KEY", "CODEX_API_KEY", "Responses API"]),
        ("gemini", ["GOOGLE_GEMINI_BASE_URL", "GEMINI_API_KEY"]),
        ("opencode", ["OPENCODE_CONFIG_CONTENT", "baseURL", "{env:"]),
        ("aider", ["OPENAI_API_BASE", "OPENAI_API_KEY"]),
    ],
)
def test_each_clis_documented_settings_are_those_its_harness_names(
    harness: str, settings: list[str]
) -> None:
    source = (ROOT / "runner" / "harnesses" / harness / "harness.py").read_text(encoding="utf-8")
    row = next(
        line for line in DOC.splitlines() if line.startswith(f"| `{harness.replace('_', '-')}`")
    )

    for setting in settings:
        assert setting in row, f"{harness}: {setting} is not in the docs' row"
        assert setting in source, f"{harness}: the docs name {setting}, the harness does not"


def test_proctor_eval_help_names_both_kinds_of_eval_file(tmp_path: Path) -> None:
    result = run_proctor("eval", "--help", cwd=tmp_path, env=proctor_env(tmp_path / "home"))

    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "*.eval.py" in text and "*.eval.json" in text
