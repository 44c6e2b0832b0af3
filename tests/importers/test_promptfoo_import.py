"""`proctor import promptfoo`: a promptfoo config becomes an eval file that loads and passes
`proctor eval`'s rules, with every weight, metric and threshold carried over, and everything
that did not carry over named."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import pytest
from django.core.management import call_command

from importers.conftest import Proctor, load_valid_suites, ruff_problems
from proctor.assertions import Assertion, assertion
from proctor.conversations import SimulatedUser
from runner.importers import ImportFailed
from runner.importers.promptfoo import translate_config
from runner.importers.promptfoo.files import load_config

AGENT_PROMPT = "You are Sam, the sales assistant for Acme. Qualify leads and book demos."
ALEX = (
    "You are Alex Thompson. You called because you want to schedule\n"
    "a demo. Be cooperative but ask about pricing before committing.\n"
    "You are reactive — only respond to what the agent asks.\n"
)

SEED_LIKE_CONFIG = """
description: Acme sales agent
prompts:
  - "You are Sam, the sales assistant for Acme. Qualify leads and book demos."
providers:
  - id: openai:chat:gpt-4.1
    label: GPT-4.1
    config:
      temperature: 0.7
      apiKeyEnvar: ACME_GATEWAY_KEY
      apiBaseUrl: https://proxy.example.com/api/v1
  - id: file://providers/eqho-agent.js:eqho:gpt-4.1
    label: Custom agent
defaultTest:
  provider:
    id: 'promptfoo:simulated-user'
    config:
      maxTurns: 8
  assert:
    - type: not-icontains
      value: "[object Object]"
      weight: 3
      metric: no-json-leak
    - type: latency
      threshold: 60000
      weight: 0
      metric: latency
tests:
  - description: Interested lead
    vars:
      instructions: |
        You are Alex Thompson. You called because you want to schedule
        a demo. Be cooperative but ask about pricing before committing.
        You are reactive — only respond to what the agent asks.
      message: "Hi, I'd like to learn more about your service."
    assert:
      - type: llm-rubric
        value: "The agent should qualify the lead and successfully schedule a demo."
        weight: 2
        metric: disposition-outcome
      - type: javascript
        value: output.length > 10
    threshold: 0.6
  - description: Payment, mid-conversation
    vars:
      instructions: You want to pay with your credit card ending in 4242.
      message: "I'd like to pay with my credit card."
      initialMessages:
        - role: user
          content: "Hi, I'd like to learn about your service."
        - role: assistant
          content: "I'd be happy to help! Can I get your name?"
    assert:
      - type: llm-rubric
        value: "The agent should handle payment smoothly."
        weight: 1.5
        metric: payment
  - description: Reschedule
    vars:
      initialMessages: file://tests/transcripts/call-abc123.json
      instructions: "Continue the conversation. You want to reschedule."
    options:
      transform: output.trim()
"""

RECORDED_CALL = [
    {"role": "user", "content": "Hi, I booked a demo for Tuesday."},
    {"role": "assistant", "content": "Great! What can I do for you?"},
]


def write_config(folder: Path, text: str, name: str = "promptfooconfig.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def seed_like_project(folder: Path) -> Path:
    transcripts = folder / "tests" / "transcripts"
    transcripts.mkdir(parents=True)
    (transcripts / "call-abc123.json").write_text(json.dumps(RECORDED_CALL), encoding="utf-8")
    return write_config(folder, SEED_LIKE_CONFIG)


def import_to_file(config: Path, output: Path | None = None):
    output = output or config.with_name(config.stem + ".eval.py")
    result = translate_config(load_config(config), config_path=config, output_path=output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(result.source, encoding="utf-8")
    return result, output


SHARED = [
    Assertion("not-icontains", "[object Object]", weight=3, metric="no-json-leak"),
    Assertion("latency", 60000, weight=0, metric="latency"),
]


def test_it_translates_a_simulated_user_config_with_weights_metrics_and_thresholds(
    tmp_path: Path,
) -> None:
    result, output = import_to_file(seed_like_project(tmp_path))

    suites = load_valid_suites(output)
    assert list(suites) == ["acme-sales-agent"]
    suite = suites["acme-sales-agent"]
    assert suite.name == "Acme sales agent"
    # promptfoo shows the prompt to the agent as its system message.
    assert suite.system_prompt == AGENT_PROMPT
    assert [(v.harness, v.model, v.name) for v in suite.variants] == [
        ("chat", "gpt-4.1", "GPT-4.1")
    ]
    assert suite.variants[0].options == {
        "api": "openai",
        "base_url": "https://proxy.example.com/api/v1",
        "api_key": "$ACME_GATEWAY_KEY",
        "temperature": 0.7,
    }
    interested, payment, reschedule = suite.cases
    assert [c.id for c in suite.cases] == [
        "interested-lead",
        "payment-mid-conversation",
        "reschedule",
    ]
    assert [c.name for c in suite.cases] == [
        "Interested lead",
        "Payment, mid-conversation",
        "Reschedule",
    ]

    # Run as promptfoo runs it: no opening prompt, the persona writes every message (the
    # suite has no prompt to send); vars.message is an ordinary var, as promptfoo reads it.
    assert suite.prompt == ""
    assert interested.user == SimulatedUser(
        instructions=ALEX.strip(), max_turns=8, persona_opens=True
    )
    assert interested.variables == {"message": "Hi, I'd like to learn more about your service."}
    assert list(interested.checks) == [
        *SHARED,
        Assertion(
            "llm-rubric",
            "The agent should qualify the lead and successfully schedule a demo.",
            weight=2,
            metric="disposition-outcome",
        ),
        assertion("javascript", "output.length > 10"),
    ]
    assert interested.threshold == 0.6

    assert payment.user.initial_messages == (
        ("user", "Hi, I'd like to learn about your service."),
        ("assistant", "I'd be happy to help! Can I get your name?"),
    )
    assert (payment.user.first_message, payment.user.persona_opens) == (None, True)
    assert list(payment.checks) == [
        *SHARED,
        Assertion(
            "llm-rubric", "The agent should handle payment smoothly.", weight=1.5, metric="payment"
        ),
    ]
    assert payment.threshold is None

    # The recorded conversation stays a file, read relative to the eval file.
    assert 'initial_messages="file://tests/transcripts/call-abc123.json"' in output.read_text()
    assert reschedule.user.initial_messages == (
        ("user", RECORDED_CALL[0]["content"]),
        ("assistant", RECORDED_CALL[1]["content"]),
    )
    assert reschedule.user.first_message is None
    # Its options.transform applies to every assertion it runs, defaultTest's included.
    assert list(reschedule.checks) == [
        assertion(a.type, a.value, weight=a.weight, metric=a.metric, transform="output.trim()")
        for a in SHARED
    ]

    assert result.untranslated == [
        "custom provider file://providers/eqho-agent.js:eqho:gpt-4.1 (no Proctor harness for it)",
    ]
    assert ruff_problems(output) == ""


def test_a_file_written_elsewhere_still_finds_the_recorded_messages(tmp_path: Path) -> None:
    config = seed_like_project(tmp_path / "promptfoo")
    _result, output = import_to_file(config, tmp_path / "evals" / "sales.eval.py")

    reschedule = load_valid_suites(output)["acme-sales-agent"].cases[2]
    assert reschedule.user.initial_messages[0] == ("user", RECORDED_CALL[0]["content"])
    assert "file://../promptfoo/tests/transcripts/call-abc123.json" in output.read_text()


def test_it_names_each_thing_it_cannot_translate(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        """
        prompts: ["Answer: {{question}}"]
        providers:
          - vertex:gemini-2.5-pro
          - id: openai:chat:gpt-4.1-mini
            config:
              apiKey: sk-literal-secret-key
              seed: 7
              functionToolCallbacks:
                lookup: "(args) => 'found'"
              tools:
                - type: function
                  function:
                    name: lookup
                    description: Look an order up.
                    parameters: {type: object, properties: {id: {type: string}}}
          - file://providers/custom.js
        outputPath: results.json
        tests:
          - description: Order status
            vars: {question: "Where is order 42?"}
            assert:
              - type: contains
                value: "Order 42"
              - type: not-contains
                value: "[object Object]"
              - type: not-regex
                value: "(?i)error"
              - type: similar
                value: "It ships tomorrow."
              - type: icontains
                value: ship
                transform: output.toLowerCase()
              - type: assert-set
                assert: [{type: icontains, value: x}]
    """,
    )
    result, output = import_to_file(config)

    assert result.untranslated == [
        "top-level outputPath",
        "provider vertex:gemini-2.5-pro (no Proctor harness for it)",
        "provider openai:chat:gpt-4.1-mini: config.seed",
        "provider openai:chat:gpt-4.1-mini: tool lookup needs a Python stub=... (functionToolCallbacks is JavaScript)",
        "provider openai:chat:gpt-4.1-mini: config.apiKey (a key is not copied into an eval file; "
        "set api_key='$VARIABLE' naming the worker's variable)",
        "custom provider file://providers/custom.js (no Proctor harness for it)",
        "test 'Order status': assertion assert-set",
    ]
    source = output.read_text()
    assert "sk-literal-secret-key" not in source
    for item in result.untranslated:
        assert f"#   - {item}" in source
    (suite,) = load_valid_suites(output).values()
    case = suite.cases[0]
    assert list(case.checks) == [
        Assertion("contains", "Order 42"),
        Assertion("not-contains", "[object Object]"),
        Assertion("not-regex", "(?i)error"),
        Assertion("similar", "It ships tomorrow."),
        assertion("icontains", "ship", transform="output.toLowerCase()"),
    ]
    (tool,) = suite.variants[0].options["tools"]
    assert (tool.name, tool.description, tool.stub) == ("lookup", "Look an order up.", None)


def test_it_translates_single_turn_tests_with_default_vars_and_list_expansion(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path / "translations",
        """
        prompts: ["Translate into {{language}}: {{text}}"]
        providers: [openai:gpt-4.1-mini, openai:chat:gpt-4.1-mini]
        defaultTest:
          vars: {text: "Good morning"}
          assert:
            - type: icontains
              value: "{{expected}}"
              weight: 2
          threshold: 0.5
        tests:
          - description: Greeting
            vars:
              language: [French, German]
              expected: "o"
            assert:
              - type: contains-any
                value: "Bonjour, Guten"
              - type: cost
                threshold: 0.01
                metric: spend
          - description: Greeting
            vars: {language: Spanish, expected: "Buenos", text: "Good day"}
            threshold: 1
    """,
    )
    result, output = import_to_file(config)

    (suite,) = load_valid_suites(output).values()
    assert suite.id == "translations"
    assert suite.prompt == "Translate into {{language}}: {{text}}"
    assert suite.system_prompt is None
    # The same model twice gets a second name, as variant names must be unique.
    assert [v.name for v in suite.variants] == ["chat:gpt-4.1-mini", "chat:gpt-4.1-mini-2"]
    assert [c.id for c in suite.cases] == ["greeting", "greeting-2", "greeting-3"]
    assert [c.variables for c in suite.cases] == [
        {"text": "Good morning", "language": "French", "expected": "o"},
        {"text": "Good morning", "language": "German", "expected": "o"},
        {"text": "Good day", "language": "Spanish", "expected": "Buenos"},
    ]
    assert list(suite.cases[0].checks) == [
        Assertion("icontains", "o", weight=2),
        Assertion("contains-any", ["Bonjour", "Guten"]),
        Assertion("cost", 0.01, metric="spend"),
    ]
    assert list(suite.cases[2].checks) == [Assertion("icontains", "Buenos", weight=2)]
    assert [c.threshold for c in suite.cases] == [0.5, 0.5, 1]
    assert result.untranslated == []


def test_a_config_mixing_single_turn_and_simulated_tests_gets_a_suite_for_each(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path,
        """
        description: Support bot
        prompts: ["{{question}}"]
        providers: [openai:chat:gpt-4.1]
        tests:
          - vars: {question: "What are your hours?"}
            assert: [{type: icontains, value: "9"}]
          - provider:
              id: promptfoo:simulated-user
              config: {instructions: "You are {{name}}, angry about a late parcel.", maxTurns: 12}
            vars: {name: Robin, question: unused}
            assert: [{type: llm-rubric, value: The agent calms Robin down.}]
    """,
    )
    result, output = import_to_file(config)

    suites = load_valid_suites(output)
    assert list(suites) == ["support-bot", "support-bot-multi-turn"]
    assert suites["support-bot"].prompt == "{{question}}"
    (single,) = suites["support-bot"].cases
    (conversation,) = suites["support-bot-multi-turn"].cases
    assert (single.id, single.user) == ("test-1", None)
    assert conversation.id == "test-2"
    assert conversation.user.instructions == "You are Robin, angry about a late parcel."
    assert conversation.user.max_turns == 12
    # A conversation stops at the smaller limit, so the case's own is raised to match.
    assert conversation.max_turns == 12
    # promptfoo fills the agent's prompt with the test's vars: the variant's own system
    # prompt is filled per case, so the variant carries it.
    (agent,) = suites["support-bot-multi-turn"].variants
    assert (agent.name, agent.system_prompt) == ("chat:gpt-4.1", "{{question}}")
    assert conversation.variables == {"name": "Robin", "question": "unused"}
    assert not any("system prompt" in item for item in result.untranslated)


def test_it_reads_prompts_tests_and_messages_from_files(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "chat.json").write_text(
        json.dumps(
            [
                {"role": "system", "content": "You are a terse assistant."},
                {"role": "user", "content": "{{question}}"},
            ]
        )
    )
    (tmp_path / "tests.csv").write_text(
        "question,__expected1,__expected2,__description\n"
        '"What is 2+2?",icontains: 4,"llm-rubric: Gives, only, the number",Sum\n'
        'Capital of France?,javascript: output.includes("Paris"),,Capital\n'
    )
    config = write_config(
        tmp_path,
        """
        prompts: [file://prompts/chat.json]
        providers: [openai:chat:gpt-4.1]
        tests: file://tests.csv
    """,
    )
    result, output = import_to_file(config)

    (suite,) = load_valid_suites(output).values()
    assert (suite.prompt, suite.system_prompt) == ("{{question}}", "You are a terse assistant.")
    total, capital = suite.cases
    assert (total.id, total.variables) == ("sum", {"question": "What is 2+2?"})
    assert list(total.checks) == [
        Assertion("icontains", "4"),
        Assertion("llm-rubric", "Gives, only, the number"),
    ]
    # promptfoo's short form of a JavaScript assertion runs as JavaScript.
    assert list(capital.checks) == [assertion("javascript", 'output.includes("Paris")')]
    assert result.untranslated == []


def test_text_from_the_config_never_becomes_code(tmp_path: Path) -> None:
    hostile = '""" + __import__("os").system("touch pwned") + """\n\'); import os; (\''
    config = write_config(
        tmp_path,
        json.dumps(
            {
                "description": hostile,
                "prompts": [hostile + " {{q}}"],
                "providers": ["openai:chat:gpt-4.1"],
                "tests": [
                    {
                        "description": hostile,
                        "vars": {"q": hostile},
                        "assert": [
                            {"type": "icontains", "value": hostile, "metric": hostile},
                            {"type": "javascript\nimport os", "value": "1"},
                        ],
                    }
                ],
            }
        ),
        name="config.json",
    )
    result, output = import_to_file(config)

    (suite,) = load_valid_suites(output).values()
    assert not (tmp_path / "pwned").exists()
    assert suite.name == hostile
    assert suite.cases[0].name == hostile
    assert suite.cases[0].variables == {"q": hostile}
    assert list(suite.cases[0].checks) == [Assertion("icontains", hostile, metric=hostile)]
    assert ruff_problems(output) == ""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("prompts: [unclosed\n", "is not valid YAML at line 2"),
        ("- just\n- a list\n", "must hold a promptfoo config"),
        ("prompts: [hi]\ntests: file://missing.yaml\n", "tests file://missing.yaml:"),
        ("prompts: [hi]\nproviders: [openai:gpt-4.1]\n", "has no tests to import"),
    ],
)
def test_a_config_it_cannot_read_is_one_sentence_naming_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    config = write_config(tmp_path, text)
    with pytest.raises(ImportFailed) as failure:
        translate_config(
            load_config(config), config_path=config, output_path=tmp_path / "out.eval.py"
        )
    assert message in str(failure.value)
    assert "promptfooconfig.yaml" in str(failure.value)


def test_the_command_writes_the_eval_file_and_lists_what_it_left_out(
    tmp_path: Path, proctor: Proctor
) -> None:
    seed_like_project(proctor.cwd)

    run = proctor("import", "promptfoo", "promptfooconfig.yaml")

    assert run.returncode == 0, run.stderr
    written = proctor.cwd / "promptfooconfig.eval.py"
    assert run.stdout.splitlines() == [
        "Wrote promptfooconfig.eval.py: suite acme-sales-agent, 3 cases.",
        "Not translated (1; also listed at the top of the file):",
        "  - custom provider file://providers/eqho-agent.js:eqho:gpt-4.1 (no Proctor harness for it)",
        "Run it with: proctor eval promptfooconfig.eval.py",
    ]
    assert load_valid_suites(written)["acme-sales-agent"].cases[0].threshold == 0.6

    again = proctor("import", "promptfoo", "promptfooconfig.yaml")
    assert again.returncode == 2
    assert again.stderr.strip() == (
        "promptfooconfig.eval.py already exists; pass --force to replace it, or choose another name with -o."
    )
    forced = proctor(
        "import", "promptfoo", "promptfooconfig.yaml", "-o", "evals/sales.eval.py", "--force"
    )
    assert forced.returncode == 0, forced.stderr
    assert (proctor.cwd / "evals" / "sales.eval.py").exists()


@pytest.mark.parametrize(
    ("files", "argv", "message"),
    [
        ({}, ["missing.yaml"], "missing.yaml does not exist."),
        ({"list.yaml": "- a\n"}, ["list.yaml"], "list.yaml must hold a promptfoo config"),
        (
            {"c.yaml": "prompts: [a]\ntests: [{}]\n"},
            ["c.yaml", "-o", "out.py"],
            "out.py must end in .eval.py",
        ),
    ],
)
def test_the_command_fails_in_one_sentence(
    tmp_path: Path, monkeypatch, files: dict, argv: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    stdout, stderr = io.StringIO(), io.StringIO()

    with pytest.raises(SystemExit) as exit_:
        call_command("import", "promptfoo", *argv, stdout=stdout, stderr=stderr)

    assert exit_.value.code == 2
    assert message in stderr.getvalue()
    assert len(stderr.getvalue().strip().splitlines()) == 1
    assert list(tmp_path.glob("*.eval.py")) == []


def test_the_real_command_fails_without_a_traceback(proctor: Proctor) -> None:
    (proctor.cwd / "bad.yaml").write_text("prompts: [a\n")

    run = proctor("import", "promptfoo", "bad.yaml")

    assert run.returncode == 2
    assert (
        run.stderr.strip()
        == "bad.yaml is not valid YAML at line 2: expected ',' or ']', but got '<stream end>'."
    )
    assert run.stdout == ""


def test_it_inlines_yaml_messages_and_renders_nunjucks_prompts_per_test(tmp_path: Path) -> None:
    (tmp_path / "seed.yaml").write_text(
        textwrap.dedent("""
        - {role: system, content: You are terse.}
        - {role: user, content: "Hi, I'm {{name}}."}
        - {role: assistant, content: Hello!}
    """)
    )
    config = write_config(
        tmp_path,
        """
        prompts: ["Help {{ name | upper }} politely.{% if vip %} They are a VIP.{% endif %}"]
        providers:
          - id: openai:chat:gpt-4.1
            config: {apiKey: "{{ env.GATEWAY_KEY }}", apiBaseUrl: "{{ env.GATEWAY_URL }}"}
        tests:
          - description: Seeded
            provider: {id: promptfoo:simulated-user, config: {maxTurns: 80, instructions: "You are {{name}}."}}
            vars: {name: Kim, initialMessages: file://seed.yaml}
            assert: [{type: equals, value: 42}]
    """,
    )
    result, output = import_to_file(config)

    (suite,) = load_valid_suites(output).values()
    (case,) = suite.cases
    assert case.user.instructions == "You are Kim."
    assert case.user.initial_messages == (("user", "Hi, I'm Kim."), ("assistant", "Hello!"))
    assert (case.user.max_turns, case.max_turns) == (50, 50)
    assert list(case.checks) == [Assertion("equals", "42")]
    assert suite.variants[0].options == {
        "api": "openai",
        "api_key": "$GATEWAY_KEY",
        "base_url": "$GATEWAY_URL",
        # Rendered per test (Jinja2), it is each case's variable.
        "system_prompt": "{{promptfoo_prompt_1}}",
    }
    assert case.variables["promptfoo_prompt_1"] == "Help KIM politely."
    assert result.untranslated == [
        "test 'Seeded': maxTurns 80 (Proctor allows 1 to 50; 50 used)",
        "test 'Seeded': initialMessages: system messages (a conversation is seeded with user and assistant messages)",
    ]


def test_each_prompt_under_each_provider_is_a_variant(tmp_path: Path) -> None:
    """promptfoo compares prompts: two prompts under two providers are four variants, named by
    provider and prompt; a simulated user's agent gets its prompt as the system prompt."""
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "sam.txt").write_text("You are Sam from Acme. Help with {{topic}}.")
    config = write_config(
        tmp_path,
        """
        description: Support
        prompts: [file://prompts/sam.txt, "You are Jo, terse."]
        providers:
          - id: openai:chat:gpt-4.1
            label: GPT
          - openai:gpt-4.1-mini
        tests:
          - description: Refund
            vars: {topic: refunds}
          - description: Books
            vars: {instructions: You want a demo.}
            provider:
              id: promptfoo:simulated-user
              config: {maxTurns: 3}
        """,
    )

    result, output = import_to_file(config)

    suites = load_valid_suites(output)
    single, multi = suites["support"], suites["support-multi-turn"]
    assert not any("the first was used" in item for item in result.untranslated)
    assert "test 'Books': prompt variable {{topic}} has no value (promptfoo leaves it empty)" in (
        result.untranslated
    )
    assert [(v.name, v.prompt, v.system_prompt) for v in single.variants] == [
        ("GPT:prompts/sam.txt", "You are Sam from Acme. Help with {{topic}}.", None),
        ("chat:gpt-4.1-mini:prompts/sam.txt", "You are Sam from Acme. Help with {{topic}}.", None),
        ('GPT:"You are Jo, terse."', "You are Jo, terse.", None),
        ('chat:gpt-4.1-mini:"You are Jo, terse."', "You are Jo, terse.", None),
    ]
    assert [(v.name, v.prompt, v.system_prompt) for v in multi.variants] == [
        ("GPT:prompts/sam.txt", None, "You are Sam from Acme. Help with {{topic}}."),
        ("chat:gpt-4.1-mini:prompts/sam.txt", None, "You are Sam from Acme. Help with {{topic}}."),
        ('GPT:"You are Jo, terse."', None, "You are Jo, terse."),
        ('chat:gpt-4.1-mini:"You are Jo, terse."', None, "You are Jo, terse."),
    ]


def test_it_reads_the_file_forms_real_configs_use(tmp_path: Path) -> None:
    """YAML scalars as promptfoo reads them (only true and false are booleans), tools listed
    as files, a glob in vars (a test per file) and CSV metadata columns (the case's tags)."""
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "lookup.json").write_text(
        json.dumps({"type": "function", "function": {"name": "lookup", "parameters": {}}})
    )
    (tmp_path / "tools" / "more.yaml").write_text(
        "- {name: book, input_schema: {type: object}}\n- {name: cancel}\n"
    )
    (tmp_path / "articles").mkdir()
    (tmp_path / "articles" / "a.txt").write_text("Bananas are berries.")
    (tmp_path / "articles" / "b.txt").write_text("Tomatoes are fruit.")
    (tmp_path / "cases.csv").write_text(
        "question,__expected,__metadata:topic,__metadata:level,__metric\n"
        "Is it open?,contains:open,hours,easy,speed\n"
    )
    config = write_config(
        tmp_path,
        """
        prompts: ["{{question}} {{article}} {{answer}}"]
        providers:
          - id: openai:chat:gpt-4.1
            config:
              tools: [file://tools/lookup.json, file://tools/more.yaml]
        defaultTest:
          vars: {answer: Yes, article: "", question: ""}
        tests:
          - description: Summaries
            vars: {article: file://articles/*.txt, question: "No", answer: On}
          - file://cases.csv
        """,
    )

    result, output = import_to_file(config)

    (suite,) = load_valid_suites(output).values()
    assert [t.name for t in suite.variants[0].options["tools"]] == ["lookup", "book", "cancel"]
    summaries_a, summaries_b, csv_case = suite.cases
    assert summaries_a.variables == {
        "answer": "On",
        "article": "Bananas are berries.",
        "question": "No",
    }
    assert summaries_b.variables["article"] == "Tomatoes are fruit."
    assert csv_case.variables == {"answer": "Yes", "article": "", "question": "Is it open?"}
    assert csv_case.tags == ("topic:hours", "level:easy")
    assert [c.metric for c in csv_case.checks] == ["speed"]  # __metric names the row's checks
    assert not any("without a name" in item for item in result.untranslated)
