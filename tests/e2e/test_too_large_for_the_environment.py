"""What Linux cannot pass a process: one argument or environment string past 128 KiB.

A prompt that large (a pasted log, a long document to summarise) reaches a command-harness
agent as a file instead, with a note in the trial saying so; and any program that cannot be
started for it says which string was too long, in the trial's own output, instead of a bare
"exit 127".
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.running import Backend, only_run, trial_folder, write_eval

PROMPT_CHARS = 200_000

LARGE_EVAL = f"""
from pathlib import Path

from proctor import case, command, profile, suite, variant

# Read from a file next to the eval file, as users keep long prompts.
PROMPT = (Path(__file__).parent / "long_prompt.txt").read_text(encoding="utf-8")

# A Python agent reading the prompt through the runner kit, and a shell agent reading the
# file itself; each writes what it got into the workspace for the check.
KIT_AGENT = (
    "python3 -c 'from proctor.runner import env; "
    "open(\\"got.txt\\", \\"w\\").write(env().prompt)'; "
    "echo '{{\\"_tag\\":\\"Finished\\",\\"reason\\":\\"done\\"}}'"
)
SHELL_AGENT = (
    'cat "$SPHYNX_PROMPT_FILE" > got.txt; echo "inline=${{SPHYNX_PROMPT-unset}}" > inline.txt; '
    "echo '{{\\"_tag\\":\\"Finished\\",\\"reason\\":\\"done\\"}}'"
)
GOT_IT = command("test $(wc -c < got.txt) -eq {PROMPT_CHARS}")

long_prompt = suite(
    "long-prompt", prompt=PROMPT,
    cases=[case("summarise-the-log", validate=GOT_IT)],
    variants=[
        variant("command", name="kit", profile=profile("kit", run=KIT_AGENT)),
        variant("command", name="shell", profile=profile("shell", run=SHELL_AGENT)),
    ],
)
huge_variable = suite(
    "huge-variable", prompt="short",
    cases=[case("cannot-start", validate=command("true"))],
    variants=[variant("command", name="huge-env", profile=profile(
        "huge-env", run="echo started", env={{"BLOB": "y" * 140_000}},
    ))],
)
"""


@pytest.fixture(scope="module")
def large(module_backend: Backend, tmp_path_factory) -> tuple[Backend, dict[str, Any]]:
    """The eval run once per database: the backend and its report."""
    folder = tmp_path_factory.mktemp("large")
    (folder / "long_prompt.txt").write_text("x" * PROMPT_CHARS, encoding="utf-8")
    write_eval(folder, "large.eval.py", LARGE_EVAL)
    return module_backend, module_backend.eval_json(folder)


def test_a_prompt_too_large_for_the_environment_reaches_the_agent_as_a_file(large):
    backend, report = large

    runs = {run["variant"]: run for run in report["runs"] if run["case"] == "summarise-the-log"}
    # Both agents got the whole prompt: the runner kit's env().prompt and the file itself.
    for variant in ("kit", "shell"):
        (trial,) = runs[variant]["trials"]
        assert trial["status"] == "passed", trial
    shell_trial = runs["shell"]["trials"][0]["id"]
    workspace_diff = (
        trial_folder(backend, report["batch"], shell_trial) / "workspace.diff"
    ).read_text()
    assert "+inline=unset" in workspace_diff
    notes = [
        data["text"]
        for kind, data in backend.events(shell_trial)
        if kind == "Log" and data.get("stream") == "proctor"
    ]
    assert any(
        f"the prompt ({PROMPT_CHARS:,} bytes) is past what one environment variable may hold"
        in note
        and "$SPHYNX_PROMPT_FILE" in note
        for note in notes
    ), notes


def test_a_program_that_cannot_start_says_which_string_was_too_long(large):
    backend, report = large

    (trial,) = only_run(report, "cannot-start")["trials"]
    assert trial["finish_reason"] == "exit 127"
    (trial_id,) = backend.trial_ids(report["batch"], "cannot-start")
    output = (trial_folder(backend, report["batch"], trial_id) / "output.log").read_text()
    assert output == (
        "[stderr] could not start bash: its environment variable BLOB is 140,006 bytes, past the "
        "131,072 bytes Linux allows one argument or environment string\n"
    )
