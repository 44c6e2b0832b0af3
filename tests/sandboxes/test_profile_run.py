"""The seed's profile example on every sandbox kind: a profile whose ``run`` names its script
relative to the profile's folder (``python3 kit_agent.py``, like ``bun run agent.ts``) finds
it, although the run starts in the workspace, and the profile's files stay out of the graded
workspace and its diff."""

from __future__ import annotations

import json

import pytest
from conftest import proctor_env
from e2e.running import AGENTS, Backend, trial_folder, write_eval

from sandboxes.conftest import KINDS, require_kind


def eval_file(kind: str) -> str:
    return f"""
    from proctor import case, command, files, profile, suite, variant

    kit = profile("kit", dir={str(AGENTS)!r}, run="python3 kit_agent.py")
    s = suite(
        "kit", prompt="Add a /health route",
        source=files({{"app/routes.py": "ROUTES = {{}}\\n"}}),
        cases=[case("relative-run", validate=command(
            "grep -q health app/routes.py && test ! -e kit_agent.py && test ! -e profile"))],
        variants=[variant("command", name="kit", profile=kit, sandbox={kind!r})],
    )
    """


@pytest.mark.parametrize("kind", KINDS)
def test_a_profile_run_finds_its_script_in_the_profile_folder(kind, tmp_path) -> None:
    require_kind(kind)
    backend = Backend("sqlite", proctor_env(tmp_path / "proctor-home"))
    project = tmp_path / "project"
    write_eval(project, "kit.eval.py", eval_file(kind))

    report = backend.eval_json(project)

    (run,) = report["runs"]
    (trial,) = run["trials"]
    assert trial["status"] == "passed", json.dumps(trial, indent=2)
    assert trial["finish_reason"] == "done"
    assert trial["answer"] == "Added the /health route."
    (trial_id,) = backend.trial_ids(report["batch"], "relative-run")
    diff = (trial_folder(backend, report["batch"], trial_id) / "workspace.diff").read_text()
    assert diff.startswith("diff --git a/app/routes.py b/app/routes.py\n")
    assert "kit_agent" not in diff and "echo_agent" not in diff


def test_a_workspace_file_of_the_same_name_wins(tmp_path) -> None:
    """The run starts in the workspace: a script the workspace has is the one that runs."""
    backend = Backend("sqlite", proctor_env(tmp_path / "proctor-home"))
    project = tmp_path / "project"
    write_eval(
        project,
        "own.eval.py",
        f"""
    from proctor import case, command, files, profile, suite, variant

    kit = profile("kit", dir={str(AGENTS)!r}, run="python3 kit_agent.py")
    own = 'print(\\'{{"_tag": "Message", "role": "assistant", "text": "the workspace script"}}\\')\\n'
    s = suite(
        "own", prompt="Add a /health route", source=files({{"kit_agent.py": own}}),
        cases=[case("workspace-script", validate=command("true"))],
        variants=[variant("command", name="kit", profile=kit)],
    )
    """,
    )

    report = backend.eval_json(project)

    (trial,) = report["runs"][0]["trials"]
    assert trial["answer"] == "the workspace script"
