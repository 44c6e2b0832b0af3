"""The file forms real promptfoo configs use, as `proctor import promptfoo` resolves them:
Nunjucks prompts rendered per test, chat prompts rendered then parsed, ``{messages}`` files,
bare prompt paths and globs, Python and ``exec:`` prompts, CSV special columns and globs of
test files. An imported Nunjucks chat prompt runs against the fake model server as rendered."""

from __future__ import annotations

import textwrap
from pathlib import Path

from fakes.openai_server import FakeModelServer

from importers.conftest import Proctor, load_valid_suites
from proctor.assertions import Assertion
from runner.importers.promptfoo import translate_config
from runner.importers.promptfoo.files import load_config


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def imported(config: Path):
    """The import's result and its suites, loaded and checked as `proctor eval` would."""
    output = config.with_name(config.stem + ".eval.py")
    result = translate_config(load_config(config), config_path=config, output_path=output)
    output.write_text(result.source, encoding="utf-8")
    return result, load_valid_suites(output)


CHAT_TEMPLATE = """
[
  {% if terse %}{"role": "system", "content": "Answer in {{ language | upper }}, briefly."},{% endif %}
  {"role": "user", "content": {{ question | dump }}}
]
"""


def test_a_nunjucks_chat_prompt_is_rendered_per_test_and_then_parsed(tmp_path: Path) -> None:
    write(tmp_path, "chat.json", CHAT_TEMPLATE)
    config = write(
        tmp_path,
        "promptfooconfig.yaml",
        """
        prompts: [file://chat.json]
        providers: [openai:gpt-4.1]
        tests:
          - vars: {terse: true, language: french, question: 'Say "hi"'}
          - vars: {question: 'Why?'}
        """,
    )

    result, suites = imported(config)

    (suite,) = suites.values()
    terse, plain = suite.cases
    assert not [item for item in result.untranslated if "prompt" in item]
    assert (suite.prompt, suite.system_prompt) == (
        "{{promptfoo_prompt_1}}",
        "{{promptfoo_system_1}}",
    )
    assert terse.variables["promptfoo_prompt_1"] == 'Say "hi"'
    assert terse.variables["promptfoo_system_1"] == "Answer in FRENCH, briefly."
    assert (plain.variables["promptfoo_prompt_1"], plain.variables["promptfoo_system_1"]) == (
        "Why?",
        "",
    )


def test_a_rendered_prompt_reaches_the_model_as_rendered(
    proctor: Proctor, fake_model_server: FakeModelServer
) -> None:
    write(proctor.cwd, "chat.json", CHAT_TEMPLATE)
    write(
        proctor.cwd,
        "promptfooconfig.yaml",
        """
        prompts: [file://chat.json]
        providers: [openai:chat:fake-model]
        tests:
          - vars: {terse: true, language: french, question: Say hi}
            assert: [{type: icontains, value: bonjour}]
        """,
    )
    assert proctor("import", "promptfoo", "promptfooconfig.yaml").returncode == 0
    fake_model_server.script("Bonjour !")
    from e2e.running import Backend

    env = {
        **proctor.env,
        "PROCTOR_HOME": str(proctor.cwd.parent / "h"),
        "OPENAI_BASE_URL": fake_model_server.url,
    }
    report = Backend("sqlite", env).eval_json(proctor.cwd, "promptfooconfig.eval.py")

    (run,) = report["runs"]
    assert run["trials"][0]["status"] == "passed"
    (request,) = fake_model_server.requests
    assert request.body["messages"] == [
        {"role": "system", "content": "Answer in FRENCH, briefly."},
        {"role": "user", "content": "Say hi"},
    ]


def test_messages_files_bare_paths_and_globs_are_prompts(tmp_path: Path) -> None:
    write(
        tmp_path,
        "support.yaml",
        "messages:\n  - {role: system, content: You help.}\n  - {role: user, content: 'Fix {{issue}}'}\n",
    )
    write(tmp_path, "prompt.txt", "Plainly: {{issue}}")
    write(tmp_path, "prompts/a.txt", "A: {{issue}}")
    write(tmp_path, "prompts/b.txt", "B: {{issue}}")
    config = write(
        tmp_path,
        "promptfooconfig.yaml",
        """
        prompts: [support.yaml, prompt.txt, 'prompts/*.txt', 'What is 2.5?', 'Either/or: {{issue}}']
        providers: [openai:gpt-4.1]
        tests: [{vars: {issue: the login page}}]
        """,
    )

    result, suites = imported(config)

    (suite,) = suites.values()
    carried = [(v.prompt, v.system_prompt) for v in suite.variants]
    assert not [item for item in result.untranslated if "prompt" in item]
    assert carried == [
        ("Fix {{issue}}", "You help."),
        ("Plainly: {{issue}}", None),
        ("A: {{issue}}", None),
        ("B: {{issue}}", None),
        ("What is 2.5?", None),
        ("Either/or: {{issue}}", None),
    ]


def test_python_and_exec_prompts_are_called_per_test(tmp_path: Path) -> None:
    write(
        tmp_path,
        "prompts.py",
        """
        def make(context):
            topic = context["vars"]["topic"]
            return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"Explain {topic}"}]
        """,
    )
    write(
        tmp_path,
        "prompt.sh",
        """
        #!/bin/sh
        python3 -c 'import json, sys; print("Summarise " + json.loads(sys.argv[1])["vars"]["topic"])' "$1"
        """,
    ).chmod(0o755)
    config = write(
        tmp_path,
        "promptfooconfig.yaml",
        """
        prompts: ['prompts.py:make', 'exec:./prompt.sh']
        providers: [openai:gpt-4.1]
        tests: [{vars: {topic: tides}}, {vars: {topic: rust}}]
        """,
    )

    result, suites = imported(config)

    (suite,) = suites.values()
    tides, rust = suite.cases
    assert not [item for item in result.untranslated if "prompt" in item]
    assert [v.prompt for v in suite.variants] == [
        "{{promptfoo_prompt_1}}",
        "{{promptfoo_prompt_2}}",
    ]
    assert (tides.variables["promptfoo_prompt_1"], tides.variables["promptfoo_system_1"]) == (
        "Explain tides",
        "Be brief.",
    )
    assert rust.variables["promptfoo_prompt_2"] == "Summarise rust"


def test_csv_special_columns_and_globbed_test_files(tmp_path: Path) -> None:
    write(
        tmp_path,
        "tests/cases.csv",
        """
        question,__expected1,__expected2,__metric,__prefix,__suffix,__description,__threshold,__metadata:area
        Capital of France?,icontains: paris,not-icontains: lyon,geo,Be exact. ,(one word),Capital,0.5,europe
        """,
    )
    write(
        tmp_path,
        "tests/more.yaml",
        "- description: Sum\n  vars: {question: '2+2?'}\n  assert: [{type: equals, value: '4'}]\n",
    )
    config = write(
        tmp_path,
        "promptfooconfig.yaml",
        """
        prompts: ['Q: {{question}}']
        providers: [openai:gpt-4.1]
        tests: 'file://tests/*'
        """,
    )

    result, suites = imported(config)

    (suite,) = suites.values()
    capital, total = suite.cases
    assert result.untranslated == []
    assert (capital.name, capital.threshold, capital.tags) == ("Capital", 0.5, ("area:europe",))
    assert list(capital.checks) == [
        Assertion("icontains", "paris", metric="geo"),
        Assertion("not-icontains", "lyon", metric="geo"),
    ]
    # The prefix and suffix go around the prompt, so it is rendered per test.
    assert suite.prompt == "{{promptfoo_prompt_1}}"
    assert capital.variables["promptfoo_prompt_1"] == "Be exact. Q: Capital of France?(one word)"
    assert total.variables["promptfoo_prompt_1"] == "Q: 2+2?"


def test_data_read_from_a_json_var_file_renders_and_is_kept_as_json_text(tmp_path: Path) -> None:
    write(tmp_path, "user.json", '{"name": "Kim", "tier": "gold"}')
    config = write(
        tmp_path,
        "promptfooconfig.yaml",
        """
        prompts: ['Greet {{ user.name }} ({{ user | dump }})']
        providers: [openai:gpt-4.1]
        tests: [{vars: {user: file://user.json}, assert: [{type: icontains, value: kim}]}]
        """,
    )

    _, suites = imported(config)

    (case,) = next(iter(suites.values())).cases
    assert case.variables["promptfoo_prompt_1"] == 'Greet Kim ({"name": "Kim", "tier": "gold"})'
    assert case.variables["user"] == '{"name": "Kim", "tier": "gold"}'
