"""Writes made while planning are never invisible: the workspace at the end of the planning
phase is compared with its start; a change is recorded in ``permission-denials.json`` as
``wrote_while_planning`` and counted per variant in ``benchmark.json``'s validity warnings
(the mode failing, unlike a write the mode refused). Shown with the command harness through
`proctor eval`, and with the real OpenCode CLI, whose plan agent's shell is not blocked."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e.running import Backend, write_eval
from fakes.chat_stream import FakeChatServer, chat_server_fixture  # noqa: F401
from harnesses.agent_cli_runs import CliTrial
from harnesses.test_opencode_cli import _write_plan_where_told, bash, opencode_variant

from conversations.recorded import AGENTS, benchmark, recorded_trial, run_eval
from runner.conversation.driver import drive_conversation
from runner.conversation.planning_writes import changed_paths
from runner.workspace.diff import WorkspaceSnapshot

STEADY = (
    f"profile('steady', dir={str(AGENTS)!r}, run='python3 \"$PROCTOR_PROFILE_DIR/steady.py\"', "
    "capabilities=['conversation-resume', 'plan-mode'], plan_file='plans/plan.md')"
)
EVAL = f"""
from proctor import case, command, profile, suite, variant

planning = suite(
    "planning",
    prompt="{{{{request}}}}",
    cases=[
        case("writes-early", variables={{"request": "[write-in-plan] Add caching."}},
             plan_mode=True, validate=command("test -f cache.py")),
        case("plans-only", variables={{"request": "Add caching."}},
             plan_mode=True, validate=command("test -f cache.py")),
    ],
    variants=[variant("command", profile={STEADY}, name="steady")],
)
"""


@pytest.fixture(scope="module")
def planned(module_sqlite: Backend, tmp_path_factory):
    folder = tmp_path_factory.mktemp("planning")
    write_eval(folder, "planning.eval.py", EVAL)
    return run_eval(module_sqlite, folder)


def test_a_write_while_planning_is_recorded_as_wrote_while_planning(
    module_sqlite: Backend, planned
) -> None:
    trial = recorded_trial(module_sqlite, planned.batch, "writes-early")

    entries = json.loads(trial.artifact("permission-denials.json"))
    assert [(e["status"], e["input"], e["mode"], e["turn"]) for e in entries] == [
        ("wrote_while_planning", {"path": "notes.md"}, "plan", 0)
    ]
    # The mode failed rather than refused: not attributed to it as a refusal is.
    assert entries[0]["plan_mode_attributed"] is False
    # The trial still ran its course and was graded.
    assert trial.row["plan_state"] == "approved" and trial.row["status"] == "passed"


def test_a_plan_written_to_the_plan_file_is_not_a_write_while_planning(
    module_sqlite: Backend, planned
) -> None:
    trial = recorded_trial(module_sqlite, planned.batch, "plans-only")

    assert trial.row["plan_state"] == "approved"
    assert not trial.has_artifact("permission-denials.json")


def test_writes_while_planning_are_a_validity_warning_of_their_variant(
    module_sqlite: Backend, planned
) -> None:
    summary = benchmark(module_sqlite, planned.batch)

    assert summary["validity_warnings"] == {"steady": {"wrote_while_planning": 1}}
    assert summary["variants"]["steady"]["validity_warnings"] == {"wrote_while_planning": 1}
    assert "wrote_while_planning × 1" in planned.result.stdout


# --- the real OpenCode CLI ----------------------------------------------------------------------


@pytest.fixture
def opencode_trial(chat_server: FakeChatServer) -> Iterator:
    trial = CliTrial(opencode_variant(chat_server))
    yield trial
    trial.destroy()


def test_opencodes_plan_agent_writing_through_its_shell_is_caught(
    chat_server: FakeChatServer, opencode_trial
) -> None:
    trial = opencode_trial
    subprocess.run(["git", "init", "--quiet", str(trial.workspace)], check=True)
    chat_server.script(
        bash("echo early > early.txt"),
        _write_plan_where_told,
        "My plan is ready.",
        bash("echo hi > hello.txt"),
        "Implemented.",
    )
    snapshot = WorkspaceSnapshot.take(Path(trial.workspace))
    try:
        outcome = drive_conversation(
            trial.session,
            opening_prompt="Plan how to create hello.txt.",
            plan_mode=True,
            plan_file=trial.harness.plan_file(trial.sandbox),
            planning_changes=lambda: changed_paths(snapshot.diff(Path(trial.workspace))),
        )
    finally:
        snapshot.discard()

    assert outcome.plan_state == "approved"
    assert (trial.workspace / "early.txt").read_text() == "early\n"
    # The shell's write is found; the plan OpenCode wrote under .opencode/plans is not one.
    assert [
        (d["status"], d["input"]["path"], d["turn"])
        for d in trial.session.denials
        if d["status"] == "wrote_while_planning"
    ] == [("wrote_while_planning", "early.txt", 0)]
