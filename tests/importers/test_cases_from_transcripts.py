"""`proctor cases from-transcripts`: each recorded conversation becomes a simulated-user case
with a persona the model wrote, the caller's first message, a hard ceiling of turns and the
reference's weighted assertions (tests/simulated/test_cases_from_recordings.py has the table,
the turn target and the flags); a recording the model cannot describe is skipped with its
reason while the others are written."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from fakes.openai_server import FakeModelServer, Reply

from importers.conftest import Proctor, load_valid_suites, ruff_problems
from proctor.assertions import Assertion
from runner.importers.transcripts import (
    REACTIVE_DIRECTIVE,
    WRAP_UP_DIRECTIVE,
    cases_from_transcripts,
    transcript_files,
)
from runner.llm import LLMConfig

PERSONA_MODEL = "fake-persona-writer"
JORDAN = "You are Jordan, who runs a small bakery and wants a demo of the ordering system."
RIVER = (
    "You are River, a patient caller checking an invoice. You are reactive: only answer what the "
    "agent asks. After your main question is resolved, begin wrapping up."
)


def persona(text: str) -> str:
    return json.dumps({"instructions": text})


def conversation(*caller_lines: str, greeting: str | None = None) -> list[dict[str, str]]:
    messages = [{"role": "assistant", "content": greeting}] if greeting else []
    for number, line in enumerate(caller_lines, start=1):
        messages += [
            {"role": "user", "content": line},
            {"role": "assistant", "content": f"Answer {number}."},
        ]
    return messages


def write_recordings(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    recordings = {
        "a-demo.json": {
            "messages": conversation("Hi, I'd like a demo.", "We have 4 staff.", "Thursday works."),
            "outcome": "Demo booked for Thursday 2pm",
        },
        "b-invoice.json": conversation(*[f"Question {n} about my invoice." for n in range(1, 11)]),
        "c-callback.json": conversation(
            "Yes, this is Sam speaking.", greeting="Hi, this is Acme returning your call."
        ),
        "d-refused.json": conversation("Hello?"),
    }
    for name, data in recordings.items():
        (folder / name).write_text(json.dumps(data), encoding="utf-8")
    (folder / "e-broken.json").write_text("{not json", encoding="utf-8")
    (folder / "f-agent-only.json").write_text(json.dumps([{"role": "assistant", "content": "Hi?"}]))
    # A tool-calling reply without words (content null) is skipped; a number is no message.
    (folder / "g-numbers.json").write_text(
        json.dumps([{"role": "assistant", "content": None}, {"role": "user", "content": 123}])
    )
    (folder / "notes.txt").write_text("not a recording")


def test_it_turns_each_recording_into_a_simulated_user_case(
    tmp_path: Path, fake_model_server: FakeModelServer
) -> None:
    write_recordings(tmp_path / "calls")
    fake_model_server.script(
        persona(JORDAN),
        "Here you go:\n```json\n" + persona(RIVER) + "\n```",
        persona("You are Sam, returning a call about a form you filled in."),
        Reply(status=400, body={"error": {"message": "the persona model is not available"}}),
    )
    config = LLMConfig(base_url=fake_model_server.url, model=PERSONA_MODEL, max_retries=0)

    result = cases_from_transcripts(
        transcript_files(tmp_path / "calls"),
        suite_id="recorded-calls",
        config=config,
        agent_model="gpt-4.1",
    )

    assert result.cases == ["a-demo", "b-invoice", "c-callback"]
    assert result.skipped == [
        (
            "d-refused.json",
            "the model could not be asked (the model endpoint refused the request (HTTP 400): "
            "the persona model is not available)",
        ),
        (
            "e-broken.json",
            "is not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
            "(char 1))",
        ),
        ("f-agent-only.json", "holds no message from the caller (role user)"),
        (
            "g-numbers.json",
            'message 2 has content 123; write it as text (or a list of {"type": "text", '
            '"text": ...} parts)',
        ),
    ]
    output = tmp_path / "recorded-calls.eval.py"
    output.write_text(result.source, encoding="utf-8")
    suite = load_valid_suites(output)["recorded-calls"]
    assert [(v.harness, v.model) for v in suite.variants] == [("chat", "gpt-4.1")]
    demo, invoice, callback = suite.cases

    # The model's persona, with both directives added when it left them out...
    assert demo.user.instructions == "\n".join([JORDAN, REACTIVE_DIRECTIVE, WRAP_UP_DIRECTIVE])
    assert demo.user.first_message == "Hi, I'd like a demo."
    assert demo.user.max_turns == 20
    assert (
        Assertion(
            "llm-rubric",
            "The conversation ends the way the recorded one did: Demo booked for Thursday 2pm",
            weight=2,
            metric="disposition-outcome",
        )
        in demo.checks
    )
    # ...and not repeated when it wrote them itself.
    assert invoice.user.instructions == RIVER
    assert invoice.user.max_turns == 20
    assert any(
        "handles it" in check.value for check in invoice.checks if check.type == "llm-rubric"
    )
    # The agent's greeting before the caller spoke seeds the conversation.
    assert callback.user.initial_messages == (
        ("assistant", "Hi, this is Acme returning your call."),
    )
    assert callback.user.first_message == "Yes, this is Sam speaking."
    assert ruff_problems(output) == ""

    first_request = fake_model_server.requests[0].body
    assert first_request["model"] == PERSONA_MODEL
    assert first_request["response_format"] == {"type": "json_object"}
    shown = first_request["messages"][-1]["content"]
    assert "CALLER: Hi, I'd like a demo." in shown and "AGENT: Answer 1." in shown
    assert "Demo booked for Thursday 2pm" in shown


def test_the_command_writes_the_cases_and_lists_what_it_skipped(
    proctor: Proctor, fake_model_server: FakeModelServer
) -> None:
    calls = proctor.cwd / "calls"
    calls.mkdir()
    (calls / "demo.json").write_text(
        json.dumps({"messages": conversation("Hi, I'd like a demo."), "outcome": "Demo booked"})
    )
    (calls / "silent.json").write_text(json.dumps(conversation("Hello?")))
    fake_model_server.script(persona(JORDAN), "I cannot help with that.")
    proctor.env.update(PROCTOR_LLM_BASE_URL=fake_model_server.url, PROCTOR_LLM_MODEL=PERSONA_MODEL)

    run = proctor(
        "cases",
        "from-transcripts",
        "calls",
        "--suite",
        "recorded-calls",
        "--agent-model",
        "gpt-4.1",
    )

    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-2:] == [
        "Wrote recorded-calls.eval.py: suite recorded-calls, 1 case (demo).",
        "Point its chat variant at the agent under test, then run: proctor eval recorded-calls.eval.py",
    ]
    assert (
        run.stderr.strip()
        == 'Skipped silent.json: the model\'s answer held no {"instructions": "..."}.'
    )
    suite = load_valid_suites(proctor.cwd / "recorded-calls.eval.py")["recorded-calls"]
    assert [c.id for c in suite.cases] == ["demo"]
    # The agent's model is the one named, never the persona writer's.
    assert suite.variants[0].model == "gpt-4.1"


@pytest.mark.parametrize(
    ("prepare", "argv", "message"),
    [
        (None, ["nowhere"], "nowhere is not a folder of recorded conversations."),
        ("empty", ["empty"], "empty holds no *.json recorded conversations."),
        ("calls", ["calls", "--suite", "Bad Id"], "--suite 'Bad Id' must be lowercase letters"),
        (
            "calls",
            ["calls", "--agent-model", "gpt-4.1"],
            "A model writes each caller's persona, but no model endpoint configured",
        ),
        ("calls", ["calls"], "Name the model of the agent under test with --agent-model MODEL"),
    ],
)
def test_the_command_fails_in_one_sentence(
    tmp_path: Path, monkeypatch, settings, prepare: str | None, argv: list[str], message: str
) -> None:
    settings.PROCTOR_LLM_BASE_URL = None
    settings.PROCTOR_LLM_COMMAND = None
    monkeypatch.chdir(tmp_path)
    if prepare:
        (tmp_path / prepare).mkdir()
        if prepare == "calls":
            (tmp_path / "calls" / "one.json").write_text(json.dumps(conversation("Hi")))
    stderr = io.StringIO()

    with pytest.raises(SystemExit) as exit_:
        call_command("cases", "from-transcripts", *argv, stdout=io.StringIO(), stderr=stderr)

    assert exit_.value.code == 2
    assert message in stderr.getvalue()
    assert len(stderr.getvalue().strip().splitlines()) == 1
    assert list(tmp_path.glob("*.eval.py")) == []
