"""promptfoo's assertions imported and run as promptfoo runs them: `proctor import promptfoo` on a
config with javascript, python, similar, transform and the other common assertions leaves
nothing untranslated, and `proctor eval` against a fake model server grades each one as
promptfoo would (JavaScript in Node, Python natively, embeddings from the endpoint)."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path
from typing import Any

from fakes.openai_server import EMBEDDINGS, FakeModelServer, word_vector

from importers.conftest import Proctor, import_and_run
from runner.conversation.simulated_user import OPENING_REQUEST
from runner.importers.promptfoo import translate_config
from runner.importers.promptfoo.files import load_config

CONFIG = """
description: Order answers
prompts: ["Answer the customer about order {{order}}: {{question}}"]
providers: [openai:chat:fake-agent]
derivedMetrics:
  - name: quality
    value: (accuracy + tone) / 2
defaultTest:
  options:
    transform: output.trim()
    provider: openai:chat:fake-grader
tests:
  - description: Order status
    vars: {question: "Where is it?", order: "42"}
    threshold: 0.5
    assert:
      - type: javascript
        value: output.includes(context.vars.order) && context.prompt.includes('order 42')
        metric: accuracy
      - type: javascript
        value: file://checks/tone.js:politeness
        metric: tone
      - type: javascript
        value: |
          const words = output.split(/\\s+/).length;
          return words / 100;
        threshold: 0.5
        metric: brevity
      - type: python
        value: "'ships' in output.lower() and context['vars']['order'] == '42'"
      - type: python
        value: file://checks/mentions.py
        threshold: 0.5
      - type: similar
        value: Order 42 ships tomorrow.
        threshold: 0.8
      - type: not-similar
        value: Your refund was declined.
      - type: contains-json
        value: {type: object, required: [eta]}
      - type: icontains-any
        value: [TOMORROW, next week]
      - type: starts-with
        value: Order 42
      - type: not-starts-with
        value: Sorry
      - type: contains
        value: TOMORROW
        transform: file://checks/shout.py
      - type: model-graded-closedqa
        value: Says when the order arrives
      - type: llm-rubric
        value: Gives the arrival day
        metric: rubric
        transform: "'ETA: ' + JSON.parse(output.slice(output.indexOf('{'))).eta"
"""
CHECKS = {
    "checks/tone.js": """
        // promptfoo calls the named export with the output and the context.
        module.exports.politeness = (output, context) => ({
          pass: !/sorry/i.test(output),
          score: 0.5,
          reason: `neutral tone for ${context.vars.question}`,
        });
    """,
    "checks/mentions.py": """
        def get_assert(output, context):
            found = context["vars"]["order"] in output
            return {"pass": found, "score": 0.6 if found else 0.0, "reason": "names the order"}
    """,
    "checks/shout.py": """
        def get_transform(output, context):
            return output.upper()
    """,
}
# Padded: only the config-wide transform (output.trim()) lets starts-with pass.
AGENT_REPLY = '  Order 42 ships tomorrow. {"eta": "tomorrow"}  '
GRADER_REPLY = "The submission says the order arrives tomorrow.\nY\nY"


def play(body: dict[str, Any]) -> str:
    """The agent, and the grader named by defaultTest.options.provider (a closed-QA grader,
    or a judge answering in JSON)."""
    if body.get("model") != "fake-grader":
        return AGENT_REPLY
    if '"passed"' in body["messages"][0]["content"]:
        return json.dumps({"passed": True, "score": 1, "reason": "gives the day"})
    return GRADER_REPLY


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def write_project(folder: Path) -> None:
    (folder / "promptfooconfig.yaml").write_text(textwrap.dedent(CONFIG).lstrip())
    for name, text in CHECKS.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(textwrap.dedent(text).lstrip())


def test_javascript_python_similar_and_transforms_import_whole_and_grade_as_promptfoo(
    proctor: Proctor, fake_model_server: FakeModelServer
) -> None:
    write_project(proctor.cwd)
    fake_model_server.script(play, play, play)

    imported, report = import_and_run(proctor, fake_model_server)

    assert "Everything translated." in imported.stdout, imported.stdout

    (run,) = report["runs"]
    (trial,) = run["trials"]
    checks = {c["metric"]: c for c in trial["checks"]}
    # Each as promptfoo grades it, on the trimmed output.
    assert checks["accuracy"]["passed"] is True
    assert (checks["tone"]["passed"], checks["tone"]["score"]) == (True, 0.5)
    assert checks["tone"]["message"] == "neutral tone for Where is it?"
    # A number passes at the assertion's threshold: 6 words / 100 is below 0.5.
    assert (checks["brevity"]["passed"], checks["brevity"]["score"]) == (False, 0.06)
    assert [c["passed"] for c in trial["checks"] if c["metric"] == "python"] == [True, True]
    assert [c["score"] for c in trial["checks"] if c["metric"] == "python"] == [1.0, 0.6]
    trimmed = AGENT_REPLY.strip()
    similar = cosine(word_vector(trimmed), word_vector("Order 42 ships tomorrow."))
    assert similar >= 0.8
    assert checks["similar"]["passed"] is True
    assert math.isclose(checks["similar"]["score"], similar)
    assert checks["not-similar"]["passed"] is True
    for metric in ("contains-json", "icontains-any", "starts-with", "not-starts-with"):
        assert checks[metric]["passed"] is True, checks[metric]
    assert checks["contains"]["passed"] is True  # only once shout.py upper-cased the output
    assert checks["model-graded-closedqa"]["passed"] is True
    assert checks["rubric"]["passed"] is True
    # derivedMetrics: a named metric computed from the others, information only.
    assert (checks["quality"]["score"], checks["quality"]["weight"]) == (0.75, 0)
    # One failure of fourteen: the weighted score still clears the test's threshold.
    assert trial["status"] == "passed", trial

    # The grader provider graded, shown the criterion; embeddings came from the endpoint.
    graders = [r.body for r in fake_model_server.requests_to() if r.body["model"] == "fake-grader"]
    closed_qa, judge = (grader["messages"][-1]["content"] for grader in graders)
    assert "Says when the order arrives" in closed_qa
    # The judge grades the output its transform made.
    assert "<final_answer>\nETA: tomorrow\n</final_answer>" in judge
    assert len(fake_model_server.requests_to(EMBEDDINGS)) == 2


def test_a_test_whose_assertions_all_fail_to_translate_is_refused_in_one_line(
    proctor: Proctor,
) -> None:
    (proctor.cwd / "promptfooconfig.yaml").write_text(
        textwrap.dedent(
            """
            prompts: ["{{q}}"]
            providers: [openai:chat:fake-agent]
            tests:
              - description: Classifies
                vars: {q: hi}
                assert:
                  - {type: classifier, value: positive}
                  - {type: rouge-n, value: hello}
              - description: Answers
                vars: {q: hello}
            """
        ).lstrip()
    )

    imported = proctor("import", "promptfoo", "promptfooconfig.yaml")

    assert imported.returncode == 2
    assert imported.stderr.strip().splitlines() == [
        "promptfooconfig.yaml: test 'Classifies': none of its assertions can be translated "
        "(assertion classifier; assertion rouge-n)"
    ]
    assert not (proctor.cwd / "promptfooconfig.eval.py").exists()


SCORED_CONFIG = """
prompts: ["{{q}}"]
providers: [openai:chat:fake-agent]
defaultTest:
  assertScoringFunction: file://scoring.js
  assert:
    - {type: icontains, value: paris, metric: accuracy}
    - {type: icontains, value: never said, metric: style}
tests:
  - description: Style counts
    vars: {q: "Capital of France?"}
  - description: Accuracy only
    vars: {q: "Capital of France, again?"}
    threshold: 0.9
    assertScoringFunction: file://scoring.py:accuracy_only
"""
SCORING_JS = """
module.exports = (scores, context) => ({
  pass: scores.style >= 1,
  score: scores.accuracy * 0.8 + scores.style * 0.2,
  reason: `style ${scores.style}, ${context.componentResults.length} results`,
});
"""
SCORING_PY = """
def accuracy_only(named_scores, context):
    score = named_scores["accuracy"]
    return {"pass": score >= context["threshold"], "score": score, "reason": "accuracy only"}
"""


def test_a_scoring_function_decides_the_trial_from_its_named_scores(
    proctor: Proctor, fake_model_server: FakeModelServer
) -> None:
    (proctor.cwd / "promptfooconfig.yaml").write_text(textwrap.dedent(SCORED_CONFIG).lstrip())
    (proctor.cwd / "scoring.js").write_text(SCORING_JS)
    (proctor.cwd / "scoring.py").write_text(textwrap.dedent(SCORING_PY).lstrip())
    fake_model_server.script("Paris.", "Paris.")

    imported, report = import_and_run(proctor, fake_model_server)

    assert "Everything translated." in imported.stdout, imported.stdout

    trials = {run["case"]: run["trials"][0] for run in report["runs"]}
    style, accuracy = trials["style-counts"], trials["accuracy-only"]
    # The same two assertions (accuracy passes, style fails), decided by each function.
    assert (style["status"], style["score"]) == ("failed", 0.8)
    assert style["checks"][-1]["message"] == "style 0, 2 results"
    assert (accuracy["status"], accuracy["score"]) == ("passed", 1.0)
    assert accuracy["checks"][-1]["message"] == "accuracy only"


CONVERSATION_CONFIG = """
prompts: ["You book product demos for Acme."]
providers: [openai:chat:fake-agent]
defaultTest:
  provider:
    id: promptfoo:simulated-user
    config: {maxTurns: 3}
tests:
  - description: Books a demo
    vars:
      instructions: You want a product demo on Thursday.
    assert:
      - type: javascript
        value: output === 'two messages'
        transform: >-
          output.split('\\n---\\n').length === 2 ? 'two messages' : output
      - type: python
        value: |
          return output.startswith('User: Can I book a demo?\\n---\\nAssistant: Booked')
"""


def persona_and_agent(body: dict[str, Any]) -> str:
    system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
    if "You book product demos for Acme." in system:
        return "Booked for Thursday."
    if body["messages"][-1]["content"] == OPENING_REQUEST:
        return "Can I book a demo?"
    return "Thanks! ###STOP###"


def test_with_a_simulated_user_the_output_is_the_whole_conversation_as_promptfoo_gives_it(
    proctor: Proctor, fake_model_server: FakeModelServer
) -> None:
    (proctor.cwd / "promptfooconfig.yaml").write_text(textwrap.dedent(CONVERSATION_CONFIG).lstrip())
    fake_model_server.script(*[persona_and_agent] * 3)

    _imported, report = import_and_run(proctor, fake_model_server)

    (run,) = report["runs"]
    (trial,) = run["trials"]
    assert [(c["passed"], c["message"]) for c in trial["checks"]] == [
        (True, "Assertion passed"),
        (True, "Assertion passed"),
    ]


def test_what_does_not_carry_over_is_named_and_the_rest_translates(tmp_path: Path) -> None:
    (tmp_path / "promptfooconfig.yaml").write_text(
        textwrap.dedent(
            """
            prompts: ["{{q}}"]
            providers: [openai:chat:fake-agent]
            derivedMetrics:
              - {name: f1, value: file://f1.js}
            tests:
              - description: Mixed
                vars: {q: hi, expected: hello}
                options:
                  provider: {text: openai:chat:judge-model, embedding: openai:embedding:emb-small}
                  rubricPrompt: Grade it.
                assert:
                  - {type: javascript, value: "output.includes('{{expected}}')", config: {x: 1}}
                  - {type: similar:dot, value: hello}
                  - {type: similar, value: hello there}
                  - {type: not-javascript, value: "output === ''"}
                  - {type: not-model-graded-closedqa, value: Is rude}
                  - {type: icontains, value: hi, config: {x: 1}}
                  - {type: not-latency, threshold: 100}
                  - {type: is-json, value: {type: object}}
                  - {type: llm-rubric, value: Greets, provider: openai:chat:other-judge}
            """
        ).lstrip()
    )
    config = tmp_path / "promptfooconfig.yaml"

    result = translate_config(
        load_config(config), config_path=config, output_path=tmp_path / "out.eval.py"
    )

    assert result.untranslated == [
        "derivedMetrics f1 (only an expression carries over)",
        "test 'Mixed': assertion similar:dot",
        # promptfoo's closed-QA grader never reads the prefix: carried over, it would mislead.
        "test 'Mixed': assertion not-model-graded-closedqa (promptfoo ignores not- here; "
        "write the criterion negated)",
        "test 'Mixed': assertion icontains: config (only javascript and python code reads it)",
        "test 'Mixed': assertion not-latency",
    ]
    assert 'config={"x": 1}' in result.source
    assert """assertion("not-javascript", "output === ''")""" in result.source
    # Vars are filled in inline code, as promptfoo renders it; graders by the test's options.
    assert "\"output.includes('hello')\"" in result.source
    assert 'assertion("similar", "hello there", grader="emb-small")' in result.source
    assert 'assertion("is-json", {"type": "object"})' in result.source
    assert (
        'assertion("llm-rubric", "Greets", grader="other-judge", rubric_prompt="Grade it.")'
        in result.source
    )


def test_with_a_simulated_user_text_assertions_read_the_whole_conversation_too(
    proctor: Proctor, fake_model_server: FakeModelServer
) -> None:
    """promptfoo grades a simulated-user test's output, the whole conversation: a word only
    the person said is in it (so icontains passes and not-icontains fails, as in promptfoo)."""
    config = CONVERSATION_CONFIG.split("    assert:")[0] + textwrap.indent(
        textwrap.dedent(
            """\
            assert:
              - type: icontains
                value: book a demo
              - type: not-icontains
                value: book a demo
              - type: starts-with
                value: "User: Can I"
            """
        ),
        "    ",
    )
    (proctor.cwd / "promptfooconfig.yaml").write_text(textwrap.dedent(config).lstrip())
    fake_model_server.script(*[persona_and_agent] * 3)

    _imported, report = import_and_run(proctor, fake_model_server)

    (run,) = report["runs"]
    (trial,) = run["trials"]
    assert [c["passed"] for c in trial["checks"]] == [True, False, True]


NEGATION_CONFIG = """
prompts: ["Answer about order {{order}}"]
providers: [openai:chat:fake-agent]
defaultTest:
  options:
    provider: openai:chat:fake-grader
    rubricPrompt:
      - role: system
        content: 'You grade an answer. Reply with JSON: {"pass": bool, "score": 0 to 1, "reason": text}'
      - role: user
        content: "Output: {{output}}\\nRubric: {{rubric}}"
tests:
  - description: Negated
    vars: {order: "42"}
    assert:
      - {type: not-equals, value: Sorry.}
      - {type: not-is-json}
      - {type: not-contains-json}
      - {type: not-contains-any, value: [refund, Sorry]}
      - {type: not-contains-all, value: "42, refund"}
      - {type: not-icontains-any, value: [REFUND]}
      - {type: not-icontains-all, value: [ORDER, TOMORROW]}
      - {type: not-javascript, value: output.length / 100, threshold: 0.5}
      - {type: not-python, value: "'refund' in output"}
      - type: javascript
        value: output.includes(context.config.word)
        config: {word: tomorrow}
        metric: js-config
      - type: python
        value: file://words.py
        config: {minimum: 3}
      - {type: not-llm-rubric, value: Offers a refund, metric: no-refund}
      - type: llm-rubric
        value: Names the order
        rubricPrompt: "Grade {{output}} by: {{rubric}} (order {{order}})"
        metric: own-prompt
  - description: Closed QA
    vars: {order: "7"}
    options:
      rubricPrompt: "Task: {{input}}\\nCriterion: {{criteria}}\\nAnswer: {{completion}}\\nY or N?"
    assert:
      - {type: model-graded-closedqa, value: Gives a day}
"""
NEGATION_REPLY = "Order 42 ships tomorrow."


def grade_negations(body: dict[str, Any]) -> str:
    """The agent, and the grader: a refund is not offered; a custom closed-QA prompt is
    answered Y; any other rubric passes."""
    if body.get("model") != "fake-grader":
        return NEGATION_REPLY
    text = "\n".join(m["content"] for m in body["messages"])
    if "Offers a refund" in text:
        return json.dumps({"pass": False, "score": 0.2, "reason": "no refund offered"})
    if "Criterion: Gives a day" in text:
        return "It gives Friday.\nY"
    return json.dumps({"pass": True, "score": 0.9, "reason": "names it"})


def test_not_forms_rubric_prompts_and_config_import_whole_and_grade_as_promptfoo(
    proctor: Proctor, fake_model_server: FakeModelServer
) -> None:
    (proctor.cwd / "promptfooconfig.yaml").write_text(NEGATION_CONFIG.lstrip())
    (proctor.cwd / "words.py").write_text(
        "def get_assert(output, context):\n"
        "    return len(output.split()) >= context['config']['minimum']\n"
    )
    fake_model_server.script(*[grade_negations] * 5)

    imported, report = import_and_run(proctor, fake_model_server)

    assert "Everything translated." in imported.stdout, imported.stdout
    negated, closed_qa = sorted(
        (trial for run in report["runs"] for trial in run["trials"]),
        key=lambda trial: len(trial["checks"]),
        reverse=True,
    )
    checks = {c["metric"]: c for c in negated["checks"]}
    # Text types: the pass inverted, the score 1 or 0 with it.
    for metric in (
        "not-equals",
        "not-is-json",
        "not-contains-json",
        "not-contains-any",
        "not-contains-all",
        "not-icontains-any",
    ):
        assert (checks[metric]["passed"], checks[metric]["score"]) == (True, 1.0), checks[metric]
    assert (checks["not-icontains-all"]["passed"], checks["not-icontains-all"]["score"]) == (
        False,
        0.0,
    )
    # A number below the threshold fails, so its negation passes, keeping the number.
    assert (checks["not-javascript"]["passed"], checks["not-javascript"]["score"]) == (True, 0.24)
    assert (checks["not-python"]["passed"], checks["not-python"]["score"]) == (True, 1.0)
    assert checks["js-config"]["passed"] is True
    assert checks["python"]["passed"] is True  # four words, at least context.config's three
    # The grader said fail at 0.2: not-llm-rubric passes at 1 - 0.2.
    assert (checks["no-refund"]["passed"], checks["no-refund"]["score"]) == (True, 0.8)
    assert (checks["own-prompt"]["passed"], checks["own-prompt"]["score"]) == (True, 0.9)
    assert negated["status"] == "failed"  # not-icontains-all: the output says both words
    assert closed_qa["status"] == "passed", closed_qa

    # Each grader was sent its rubricPrompt filled: defaultTest's, the assertion's own, and the
    # test's closed-QA prompt.
    sent = [
        r.body["messages"]
        for r in fake_model_server.requests_to()
        if r.body["model"] == "fake-grader"
    ]
    default_prompt = next(m for m in sent if len(m) == 2)
    assert default_prompt[0]["role"] == "system"
    assert default_prompt[1]["content"] == f"Output: {NEGATION_REPLY}\nRubric: Offers a refund"
    assert [
        {"role": "user", "content": f"Grade {NEGATION_REPLY} by: Names the order (order 42)"}
    ] in sent
    assert [
        {
            "role": "user",
            "content": f"Task: Answer about order 7\nCriterion: Gives a day\n"
            f"Answer: {NEGATION_REPLY}\nY or N?",
        }
    ] in sent
