"""A promptfoo prompt reading ``_conversation`` makes each test one more turn of a conversation:
imported, test i of a conversation is a case asking the conversation's questions 1..i in turn,
the agent answering each, graded on its own last answer, as promptfoo grades test i."""

from __future__ import annotations

import textwrap
from typing import Any

from fakes.openai_server import FakeModelServer

from importers.conftest import Proctor, import_and_run

REPLAYED = (
    '[{% for completion in _conversation %}{"role":"user","content":"{{completion.input}}"},'
    '{"role":"assistant","content":"{{completion.output}}"},{% endfor %}'
)
# The not-icontains assertions hold only when a test is graded on its own answer: the earlier
# answers of its conversation name Romulus and Athens.
CONFIG = f"""
prompts:
  - id: '{REPLAYED}{{"role":"user","content":"{{{{question}}}}"}}]'
    label: plain
  - id: '{REPLAYED}{{"role":"user","content":"Briefly: {{{{question}}}}"}}]'
    label: brief
providers: [openai:chat:fake-agent]
tests:
  - description: founder
    vars: {{question: "Who founded Rome?"}}
    assert: [{{type: icontains, value: romulus}}]
  - description: brother
    vars: {{question: "Who was his brother?"}}
    assert: [{{type: icontains, value: remus}}, {{type: not-icontains, value: romulus}}]
  - description: childhood
    vars: {{question: "Where did they grow up?"}}
    assert: [{{type: icontains, value: palatine}}]
  - description: city
    vars: {{question: "Name a Greek city."}}
    metadata: {{conversationId: greece}}
    assert: [{{type: icontains, value: athens}}]
  - description: goddess
    vars: {{question: "Its patron goddess?"}}
    metadata: {{conversationId: greece}}
    assert: [{{type: icontains, value: athena}}, {{type: not-icontains, value: athens}}]
"""
ANSWERS = {
    "Who founded Rome?": "Romulus founded Rome.",
    "Who was his brother?": "His brother was Remus.",
    "Where did they grow up?": "On the Palatine hill.",
    "Name a Greek city.": "Athens.",
    "Its patron goddess?": "Athena.",
}


def agent(body: dict[str, Any]) -> str:
    return ANSWERS[body["messages"][-1]["content"].removeprefix("Briefly: ")]


def test_each_test_is_one_more_turn_of_its_conversation_graded_on_its_own_answer(
    proctor: Proctor, fake_model_server: FakeModelServer
) -> None:
    (proctor.cwd / "promptfooconfig.yaml").write_text(textwrap.dedent(CONFIG).lstrip())
    # Each prompt's conversations: Rome 1 + 2 + 3 requests, Greece 1 + 2.
    fake_model_server.script(*[agent] * 18)

    imported, report = import_and_run(proctor, fake_model_server)

    assert "_conversation" not in imported.stdout
    assert "Everything translated." in imported.stdout
    trials = {(r["case"], r["variant"]): r["trials"][0] for r in report["runs"]}
    assert len(trials) == 10
    failed = {
        key: [c["message"] for c in t["checks"] if not c["passed"]]
        for key, t in trials.items()
        if t["status"] != "passed"
    }
    assert failed == {}
    assert trials[("brother", "chat:fake-agent:brief")]["answer"] == "His brother was Remus."
    asked = sorted(
        [m["content"] for m in r.body["messages"] if m["role"] != "system"]
        for r in fake_model_server.requests
    )
    # Each case's last request holds its conversation so far, under its own variant's prompt.
    assert [
        "Briefly: Who founded Rome?",
        "Romulus founded Rome.",
        "Briefly: Who was his brother?",
        "His brother was Remus.",
        "Briefly: Where did they grow up?",
    ] in asked
    assert [
        "Who founded Rome?",
        "Romulus founded Rome.",
        "Who was his brother?",
        "His brother was Remus.",
        "Where did they grow up?",
    ] in asked
    # The second conversation holds nothing of the first.
    assert ["Name a Greek city.", "Athens.", "Its patron goddess?"] in asked
    assert ["Briefly: Name a Greek city.", "Athens.", "Briefly: Its patron goddess?"] in asked
    assert len(asked) == 18 and fake_model_server.unused_replies() == 0
