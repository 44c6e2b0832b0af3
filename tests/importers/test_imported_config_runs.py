"""An imported promptfoo config runs as it is: `proctor import promptfoo`, then `proctor eval`
against a fake model server playing the chat agent, the simulated user and the judge. The
weighted score passes the case at its threshold although one assertion fails."""

from __future__ import annotations

import json
import textwrap
from typing import Any

from conftest import proctor_env
from e2e.running import Backend
from fakes.openai_server import FakeModelServer

from importers.conftest import Proctor, import_and_run
from runner.conversation.simulated_user import OPENING_REQUEST

CONFIG = """
description: Demo bookings
prompts: ["You book product demos for Acme."]
providers: [openai:chat:fake-agent]
defaultTest:
  provider:
    id: promptfoo:simulated-user
    config: {maxTurns: 3}
  assert:
    - {type: not-icontains, value: "[object Object]", weight: 3, metric: no-json-leak}
tests:
  - description: Books a demo
    vars:
      instructions: You want a product demo on Thursday afternoon.
      message: Can I book a demo?
    assert:
      - {type: icontains, value: thursday, weight: 2, metric: booking}
      - {type: llm-rubric, value: The agent books the demo., metric: tone}
      - {type: icontains, value: something never said, metric: missing}
    threshold: 0.6
"""
AGENT_REPLY = "Of course! You're booked for Thursday at 2pm."


def play(body: dict[str, Any]) -> str:
    """The agent, the simulated user and the judge, told apart by their system message."""
    system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
    if '"passed"' in system:
        return json.dumps({"passed": True, "score": 1.0, "reason": "booked politely"})
    if "You book product demos for Acme." in system:
        return AGENT_REPLY
    # The persona: it opens the conversation itself, then wraps up.
    if body["messages"][-1]["content"] == OPENING_REQUEST:
        return "Can I book a demo?"
    return "Perfect, thanks! ###STOP###"


def test_an_imported_config_runs_and_passes_on_its_weighted_score(
    proctor: Proctor, fake_model_server: FakeModelServer
) -> None:
    (proctor.cwd / "promptfooconfig.yaml").write_text(textwrap.dedent(CONFIG).lstrip())
    fake_model_server.script(*[play] * 10)

    _, report = import_and_run(proctor, fake_model_server)

    (run,) = report["runs"]
    assert (run["suite"], run["case"], run["variant"]) == (
        "demo-bookings",
        "books-a-demo",
        "chat:fake-agent",
    )
    (trial,) = run["trials"]
    assert trial["status"] == "passed", trial
    assert trial["answer"] == AGENT_REPLY
    assert [(c["kind"], c["passed"]) for c in trial["checks"]] == [
        ("assertion", True),
        ("assertion", True),
        ("assertion", True),
        ("assertion", False),
    ]
    agent_calls = [
        r.body
        for r in fake_model_server.requests
        if r.body["messages"][0]["content"] == "You book product demos for Acme."
    ]
    assert agent_calls[0]["model"] == "fake-agent"
    # As promptfoo runs it: the persona wrote the first message (no fixed opening line), and
    # its closing ###STOP### ended the conversation without reaching the agent.
    assert [call["messages"][1:] for call in agent_calls] == [
        [{"role": "user", "content": "Can I book a demo?"}]
    ]


# promptfoo's getting-started config: two prompts compared under two providers.
GETTING_STARTED = """
description: Tweets
prompts:
  - "Write a tweet about {{topic}}"
  - label: concise
    raw: "Write a concise, funny tweet about {{topic}}"
providers:
  - openai:gpt-4o-mini
  - openai:gpt-4o
tests:
  - vars:
      topic: bananas
    assert:
      - type: icontains
        value: bananas
  - vars:
      topic: avocado toast
    assert:
      - type: icontains
        value: avocado
"""
FIRST = 'chat:gpt-4o-mini:"Write a tweet about {{topic}}"'


def test_prompts_times_providers_are_variants_that_dry_run_and_run(
    proctor: Proctor, fake_model_server: FakeModelServer
) -> None:
    (proctor.cwd / "promptfooconfig.yaml").write_text(textwrap.dedent(GETTING_STARTED).lstrip())
    imported = proctor("import", "promptfoo", "promptfooconfig.yaml")
    assert imported.returncode == 0, imported.stderr
    backend = Backend(
        "sqlite",
        proctor_env(proctor.cwd.parent / "eval-home", PROCTOR_LLM_BASE_URL=fake_model_server.url),
    )

    listed = backend.eval(proctor.cwd, "promptfooconfig.eval.py", "--dry-run", "--json")

    assert listed.returncode == 0, listed.stderr
    (suite,) = json.loads(listed.stdout)["suites"]
    assert [(v["name"], v["model"], v["prompt"]) for v in suite["variants"]] == [
        (FIRST, "gpt-4o-mini", "Write a tweet about {{topic}}"),
        ('chat:gpt-4o:"Write a tweet about {{topic}}"', "gpt-4o", "Write a tweet about {{topic}}"),
        ("chat:gpt-4o-mini:concise", "gpt-4o-mini", "Write a concise, funny tweet about {{topic}}"),
        ("chat:gpt-4o:concise", "gpt-4o", "Write a concise, funny tweet about {{topic}}"),
    ]
    assert not backend.home.exists()

    # The model answers with what it was asked, and which model it is.
    fake_model_server.script(
        *[lambda body: f"{body['model']}: {body['messages'][-1]['content']}"] * 8
    )
    report = backend.eval_json(proctor.cwd, "promptfooconfig.eval.py")

    answers = {(r["case"], r["variant"]): r["trials"][0]["answer"] for r in report["runs"]}
    assert len(answers) == 8
    assert answers[("test-1", FIRST)] == "gpt-4o-mini: Write a tweet about bananas"
    assert answers[("test-2", "chat:gpt-4o:concise")] == (
        "gpt-4o: Write a concise, funny tweet about avocado toast"
    )
    assert all(t["status"] == "passed" for r in report["runs"] for t in r["trials"])


SEEDED_CONFIG = """
prompts: ["You book product demos for Acme."]
providers: [openai:chat:fake-agent]
defaultTest:
  provider:
    id: promptfoo:simulated-user
    config: {maxTurns: 2}
tests:
  - description: Resumes mid-call
    vars:
      instructions: You want a demo on Thursday. Keep asking questions.
      initialMessages:
        - {role: user, content: "Hi, I called earlier."}
        - {role: assistant, content: "Welcome back! How can I help?"}
        - {role: user, content: "About that demo..."}
    assert:
      - {type: icontains, value: thursday}
"""


def test_a_seeded_call_ending_with_the_caller_is_answered_first_and_max_turns_counts_the_persona(
    proctor: Proctor, fake_model_server: FakeModelServer
) -> None:
    """promptfoo's simulated user: seeded messages ending with the caller's are answered by the
    agent before the persona speaks (that answer counts as no turn), and maxTurns: 2 lets the
    persona write two messages."""
    (proctor.cwd / "promptfooconfig.yaml").write_text(textwrap.dedent(SEEDED_CONFIG).lstrip())
    persona_lines = iter(["Is Thursday free?", "Great, book it.", "One more thing."])

    def seeded_play(body: dict[str, Any]) -> str:
        system = body["messages"][0]["content"]
        if "You book product demos for Acme." in system:
            return f"Thursday works (reply {len(body['messages']) // 2})."
        return next(persona_lines)

    fake_model_server.script(*[seeded_play] * 10)

    _, report = import_and_run(proctor, fake_model_server)

    (trial,) = report["runs"][0]["trials"]
    assert trial["status"] == "passed", trial
    agent_calls = [
        [m["content"] for m in r.body["messages"][1:]]
        for r in fake_model_server.requests
        if r.body["messages"][0]["content"] == "You book product demos for Acme."
    ]
    seed = ["Hi, I called earlier.", "Welcome back! How can I help?", "About that demo..."]
    assert agent_calls == [
        seed,
        [*seed, "Thursday works (reply 2).", "Is Thursday free?"],
        [
            *seed,
            "Thursday works (reply 2).",
            "Is Thursday free?",
            "Thursday works (reply 3).",
            "Great, book it.",
        ],
    ]
    assert trial["conversation"]["stop_cause"] == "max_turns_reached"
