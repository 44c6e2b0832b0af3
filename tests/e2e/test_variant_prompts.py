"""Prompts compared as variants (issue 35): a variant may carry its own prompt and system
prompt, filled with each case's variables as the suite's prompt is; its default name says which
prompt; the batch runs and reports it like any other variant."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.running import Backend, write_eval

# The agent answers with exactly what it was sent: the prompt, then its system prompt.
ECHO_AGENT = """
import json, os
system_file = os.environ.get("SPHYNX_SYSTEM_PROMPT_FILE", "")
system = open(system_file).read().strip() if system_file and os.path.exists(system_file) else ""
text = os.environ["SPHYNX_PROMPT"] + " | " + system
print(json.dumps({"_tag": "Message", "role": "assistant", "text": text}))
print(json.dumps({"_tag": "Finished", "reason": "done"}))
"""

PROMPTS_EVAL = """
from pathlib import Path

from proctor import case, command, profile, suite, variant

HERE = Path(__file__).resolve().parent
echo = profile("echo", run=f"python3 {HERE / 'echo_agent.py'}")

greetings = suite(
    "greetings",
    prompt="Say {{word}}",
    system_prompt="Be plain.",
    cases=[
        case("hello", variables={"word": "hello", "tone": "cheerful"}, validate=command("true")),
        case("bye", variables={"word": "bye", "tone": "sad"}, validate=command("true")),
    ],
    variants=[
        variant("command", model="m", profile=echo),
        variant("command", model="m", profile=echo, prompt="Shout {{word}}!"),
        variant("command", model="m", profile=echo, prompt_name="terse",
                prompt="{{word}}.", system_prompt="Be {{tone}}."),
    ],
)
"""

SUITE_PROMPT = "command:echo:m"
SHOUT = 'command:echo:m:"Shout {{word}}!"'
TERSE = "command:echo:m:terse"


def write_project(root: Path, text: str = PROMPTS_EVAL) -> Path:
    write_eval(root, "prompts.eval.py", text)
    (root / "echo_agent.py").write_text(ECHO_AGENT.lstrip())
    return root


def test_each_variant_sends_its_own_prompt_filled_with_the_case_variables(
    sqlite_backend: Backend, tmp_path
):
    project = write_project(tmp_path / "project")

    report = sqlite_backend.eval_json(project)

    answers = {(r["case"], r["variant"]): r["trials"][0]["answer"] for r in report["runs"]}
    assert answers == {
        ("hello", SUITE_PROMPT): "Say hello | Be plain.",
        ("hello", SHOUT): "Shout hello! | Be plain.",
        ("hello", TERSE): "hello. | Be cheerful.",
        ("bye", SUITE_PROMPT): "Say bye | Be plain.",
        ("bye", SHOUT): "Shout bye! | Be plain.",
        ("bye", TERSE): "bye. | Be sad.",
    }
    # Recorded in the variant itself: what a worker elsewhere runs.
    specs = {
        name: sqlite_backend.json_value(spec)
        for name, spec in sqlite_backend.rows("SELECT name, spec FROM evals_app_variant")
    }
    assert specs[TERSE]["options"]["prompt"] == "{{word}}."
    assert specs[TERSE]["options"]["system_prompt"] == "Be {{tone}}."
    assert "prompt" not in specs[SUITE_PROMPT]["options"]


def test_the_dry_run_lists_each_variants_prompt(sqlite_backend: Backend, tmp_path):
    project = write_project(tmp_path / "project")

    result = sqlite_backend.eval(project, "--dry-run", "--json")

    assert result.returncode == 0, result.stderr
    [suite] = json.loads(result.stdout)["suites"]
    assert [(v["name"], v["prompt"], v["system_prompt"]) for v in suite["variants"]] == [
        (SUITE_PROMPT, None, None),
        (SHOUT, "Shout {{word}}!", None),
        (TERSE, "{{word}}.", "Be {{tone}}."),
    ]


def test_a_variant_prompt_variable_a_case_lacks_is_one_line(sqlite_backend: Backend, tmp_path):
    project = write_project(
        tmp_path / "project",
        PROMPTS_EVAL.replace('"word": "bye", "tone": "sad"', '"word": "bye"'),
    )

    result = sqlite_backend.eval(project, "--dry-run")

    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "prompts.eval.py: suite greetings, case bye: variable {{tone}} of variant "
        "command:echo:m:terse's system prompt has no value in variables"
    ]
