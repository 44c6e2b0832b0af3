"""promptfoo providers carried over by `proctor import promptfoo`, as a user migrating would try
them: the getting-started config (prompts × OpenAI and Anthropic providers) imports, passes
`proctor eval --dry-run` with the vendors' endpoints in the environment, and runs and grades
against the fake model server; exec:, Python and echo providers run as command-harness agents."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest
from e2e.running import Backend
from fakes.anthropic_messages import ANTHROPIC_MESSAGES
from fakes.openai_server import CHAT_COMPLETIONS, FakeModelServer

from importers.conftest import Proctor, load_valid_suites

# promptfoo's examples/getting-started config, with the Claude provider its comment offers.
GETTING_STARTED = """
# yaml-language-server: $schema=https://promptfoo.dev/config-schema.json
description: 'Getting started'
prompts:
  - 'Convert this English to {{language}}: {{input}}'
  - 'Translate to {{language}}: {{input}}'

providers:
  - openai:gpt-4.1
  - openai:o4-mini
  - anthropic:messages:claude-4-sonnet-20250514  # Claude model

tests:
  - vars:
      language: French
      input: Hello world
    assert:
      - type: contains
        value: 'Bonjour le monde'
  - vars:
      language: Spanish
      input: Where is the library?
    assert:
      - type: icontains
        value: 'Dónde está la biblioteca'
"""
TRANSLATIONS = {
    "Hello world": "Bonjour le monde",
    "Where is the library?": "¿Dónde está la biblioteca?",
}


def write(proctor: Proctor, name: str, text: str) -> None:
    path = proctor.cwd / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())


def imported(proctor: Proctor, config: str = "promptfooconfig.yaml") -> str:
    result = proctor("import", "promptfoo", config)
    assert result.returncode == 0, result.stderr
    return result.stdout


def backend(proctor: Proctor, **env: str) -> Backend:
    """`proctor eval` with a home of its own and no project model endpoint."""
    return Backend(
        "sqlite", {**proctor.env, "PROCTOR_HOME": str(proctor.cwd.parent / "eval-home"), **env}
    )


def translator(wrong_for: str):
    """A fake model that translates the prompt's input, except for the model ``wrong_for``."""

    def answer(body: dict[str, Any]) -> str:
        last = body["messages"][-1]["content"]
        text = last if isinstance(last, str) else last[0]["text"]
        if body.get("model") == wrong_for:
            return "Salut tout le monde"
        return next((french for english, french in TRANSLATIONS.items() if english in text), "?")

    return answer


def test_getting_started_imports_as_a_variant_per_prompt_and_provider(proctor: Proctor) -> None:
    write(proctor, "promptfooconfig.yaml", GETTING_STARTED)

    out = imported(proctor)

    assert "Everything translated." in out
    (suite,) = load_valid_suites(proctor.cwd / "promptfooconfig.eval.py").values()
    shown = {(v.model, v.options.get("api"), v.prompt) for v in suite.variants}
    assert shown == {
        (model, api, prompt)
        for model, api in (
            ("gpt-4.1", "openai"),
            ("o4-mini", "openai"),
            ("claude-4-sonnet-20250514", "anthropic"),
        )
        for prompt in (
            "Convert this English to {{language}}: {{input}}",
            "Translate to {{language}}: {{input}}",
        )
    }


def test_getting_started_passes_the_dry_run_only_with_an_endpoint_in_the_environment(
    proctor: Proctor,
) -> None:
    write(proctor, "promptfooconfig.yaml", GETTING_STARTED)
    imported(proctor)
    bare = backend(proctor)
    for name in (
        "OPENAI_BASE_URL",
        "OPENAI_API_BASE_URL",
        "OPENAI_API_KEY",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_API_KEY",
    ):
        bare.env.pop(name, None)

    refused = bare.eval(proctor.cwd, "promptfooconfig.eval.py", "--dry-run")
    dry = bare.eval(
        proctor.cwd,
        "promptfooconfig.eval.py",
        "--dry-run",
        "--json",
        extra_env={
            "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
            "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
        },
    )

    assert refused.returncode == 2
    assert "set ANTHROPIC_BASE_URL, PROCTOR_LLM_BASE_URL" in refused.stderr + refused.stdout
    assert dry.returncode == 0, dry.stderr
    (listed,) = json.loads(dry.stdout)["suites"]
    assert len(listed["variants"]) == 6 and len(listed["cases"]) == 2


def test_getting_started_runs_against_the_fake_server_and_grades_per_variant(
    proctor: Proctor, fake_model_server: FakeModelServer
) -> None:
    write(proctor, "promptfooconfig.yaml", GETTING_STARTED)
    imported(proctor)
    fake_model_server.script(*[translator(wrong_for="o4-mini")] * 8)
    fake_model_server.script(*[translator(wrong_for="o4-mini")] * 4, route=ANTHROPIC_MESSAGES)
    run = backend(
        proctor,
        OPENAI_BASE_URL=fake_model_server.url,
        OPENAI_API_KEY="sk-openai-test",
        ANTHROPIC_BASE_URL=fake_model_server.root_url,
        ANTHROPIC_API_KEY="sk-ant-test",
    )

    report = run.eval_json(proctor.cwd, "promptfooconfig.eval.py")

    outcome = {
        (r["variant"].split(":")[1], r["case"]): r["trials"][0]["status"] for r in report["runs"]
    }
    assert len(report["runs"]) == 12
    assert {status for (model, _), status in outcome.items() if model == "o4-mini"} == {"failed"}
    assert {status for (model, _), status in outcome.items() if model != "o4-mini"} == {"passed"}
    claude_calls = fake_model_server.requests_to(ANTHROPIC_MESSAGES)
    assert len(claude_calls) == 4
    assert {c.headers["x-api-key"] for c in claude_calls} == {"sk-ant-test"}
    sent = {c.body["messages"][0]["content"][0]["text"] for c in claude_calls}
    assert "Translate to French: Hello world" in sent
    openai_calls = fake_model_server.requests_to(CHAT_COMPLETIONS)
    assert {c.headers["authorization"] for c in openai_calls} == {"Bearer sk-openai-test"}


def test_openai_config_carries_over_into_the_variant(proctor: Proctor) -> None:
    write(
        proctor,
        "promptfooconfig.yaml",
        """
        prompts: ['Answer in JSON: {{q}}']
        providers:
          - id: openai:chat:gpt-4.1-mini
            label: json-mini
            config:
              apiHost: gateway.example.com
              apiKeyEnvar: GATEWAY_KEY
              temperature: 0.3
              max_tokens: 200
              response_format: {type: json_object}
          - id: anthropic:messages:claude-3-5-haiku-latest
            config: {apiBaseUrl: 'http://127.0.0.1:9', max_tokens: 64, temperature: 1}
        tests: [{vars: {q: why}}]
        """,
    )

    imported(proctor)

    (suite,) = load_valid_suites(proctor.cwd / "promptfooconfig.eval.py").values()
    mini, haiku = suite.variants
    assert mini.name == "json-mini"
    assert dict(mini.options) == {
        "api": "openai",
        "base_url": "https://gateway.example.com/v1",
        "api_key": "$GATEWAY_KEY",
        "temperature": 0.3,
        "max_tokens": 200,
        "response_format": {"type": "json_object"},
    }
    assert (haiku.options["api"], haiku.options["base_url"], haiku.options["max_tokens"]) == (
        "anthropic",
        "http://127.0.0.1:9",
        64,
    )


SCRIPT_PROVIDERS = """
description: Script providers
prompts: ['Capital of {{country}}?']
providers:
  - 'exec: python3 answer.py --upper'
  - id: file://provider.py
    label: py
    config: {city: Paris}
  - python:provider.py:async_call
  - echo
tests:
  - vars: {country: France}
    assert:
      - {type: icontains, value: paris}
"""
ANSWER_PY = """
import json, sys

prompt, options, context = sys.argv[-3], json.loads(sys.argv[-2]), json.loads(sys.argv[-1])
assert sys.argv[1] == "--upper" and context["prompt"]["raw"] == prompt
print(f"PARIS (asked: {prompt})")
"""
PROVIDER_PY = """
async def async_call(prompt, options, context):
    return call_api(prompt, options, context)


def call_api(prompt, options, context):
    city = options["config"].get("city", "Paris")
    return {"output": f"{city}, for {prompt}", "tokenUsage": {"prompt": 12, "completion": 3, "total": 15}, "cost": 0.002}
"""


def test_exec_python_and_echo_providers_run_as_command_agents_and_grade(proctor: Proctor) -> None:
    write(proctor, "cfg/promptfooconfig.yaml", SCRIPT_PROVIDERS)
    write(proctor, "cfg/answer.py", ANSWER_PY)
    write(proctor, "cfg/provider.py", PROVIDER_PY)
    out = imported(proctor, "cfg/promptfooconfig.yaml")
    assert "Everything translated." in out

    report = backend(proctor).eval_json(proctor.cwd, "cfg/promptfooconfig.eval.py")

    by_variant = {r["variant"]: r["trials"][0] for r in report["runs"]}
    assert set(by_variant) == {
        "command:exec: python3 answer.py --upper",
        "command:py",
        "command:python:provider.py:async_call",
        "command:echo",
    }
    assert by_variant["command:exec: python3 answer.py --upper"]["status"] == "passed"
    assert by_variant["command:py"]["status"] == "passed"
    assert by_variant["command:python:provider.py:async_call"]["status"] == "passed"
    # echo answers the prompt itself, which names France, not Paris.
    assert by_variant["command:echo"]["status"] == "failed"


def test_a_python_provider_that_is_missing_is_named_at_import(proctor: Proctor) -> None:
    write(
        proctor,
        "promptfooconfig.yaml",
        """
        prompts: ['hi']
        providers: [file://nowhere.py]
        tests: [{vars: {}}]
        """,
    )

    result = proctor("import", "promptfoo", "promptfooconfig.yaml")

    assert result.returncode != 0
    assert "nowhere.py does not exist" in result.stderr + result.stdout


@pytest.mark.parametrize(
    "provider", ["file://provider.js", "vertex:gemini-2.5-pro", "anthropic:completion:claude-2"]
)
def test_a_provider_without_a_harness_is_named_untranslated(
    proctor: Proctor, provider: str
) -> None:
    write(
        proctor,
        "promptfooconfig.yaml",
        f"""
        prompts: ['hi']
        providers: ['{provider}', openai:gpt-4.1]
        tests: [{{vars: {{}}}}]
        """,
    )

    out = imported(proctor)

    assert f"provider {provider} (no Proctor harness for it)" in out


# Providers that answer from the test's vars, as real ones do: the prompt names only the topic;
# the audience and the word count reach the scripts in promptfoo's context alone.
VARS_PROVIDERS = """
description: Providers reading vars
prompts:
  - 'Write about {{topic}}.'
  - '{% if audience %}For {{ audience }}: {% endif %}{{ topic | upper }}'
providers:
  - 'exec: python3 brief.py'
  - file://writer.py
tests:
  - vars: {topic: bees, audience: children, words: 12, facts: {legs: 6, wings: [fore, hind]}}
    assert:
      - {type: contains, value: 'bees for children in 12 words, 6 legs'}
      - type: python
        value: "context['vars']['facts'] == {'legs': 6, 'wings': ['fore', 'hind']} and 'promptfoo_data_vars' not in context['vars']"
  - vars: {topic: tides, audience: sailors, words: 40, facts: file://tides.json}
    assert:
      - {type: contains, value: 'tides for sailors in 40 words, 0 legs'}
"""
BRIEF_PY = """
import json, sys

test_vars = json.loads(sys.argv[-1])["vars"]
print(f"{test_vars['topic']} for {test_vars['audience']} in {test_vars['words']!r} words, "
      f"{test_vars['facts']['legs']} legs (vars: {', '.join(sorted(test_vars))})")
"""
WRITER_PY = """
def call_api(prompt, options, context):
    v = context["vars"]
    return {"output": f"{v['topic']} for {v['audience']} in {v['words']!r} words, "
                      f"{v['facts']['legs']} legs (vars: {', '.join(sorted(v))})"}
"""


def test_exec_and_python_providers_answer_from_the_tests_vars(proctor: Proctor) -> None:
    write(proctor, "cfg/promptfooconfig.yaml", VARS_PROVIDERS)
    write(proctor, "cfg/brief.py", BRIEF_PY)
    write(proctor, "cfg/writer.py", WRITER_PY)
    write(proctor, "cfg/tides.json", '{"legs": 0, "moon": true}')
    imported(proctor, "cfg/promptfooconfig.yaml")

    report = backend(proctor).eval_json(proctor.cwd, "cfg/promptfooconfig.eval.py")

    trials = [(r["variant"], r["trials"][0]) for r in report["runs"]]
    assert len(trials) == 8  # 2 prompts x 2 providers x 2 tests
    assert {trial["status"] for _variant, trial in trials} == {"passed"}
    answers = {trial["answer"] for _variant, trial in trials}
    # promptfoo's vars, a number still a number, data (inline or from a JSON file) still
    # data, and none of the importer's own variables.
    assert answers == {
        "bees for children in 12 words, 6 legs (vars: audience, facts, topic, words)",
        "tides for sailors in 40 words, 0 legs (vars: audience, facts, topic, words)",
    }
