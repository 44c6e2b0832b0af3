"""The command harness end to end: runner processes written for the original protocol (bash
scripts that only echo event lines) run unchanged, with the environment the protocol promises,
and what they print is recorded as the protocol says."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from e2e.running import AGENTS, Backend, only_run, trial_folder, write_eval

# Each case's prompt starts with the agent script to run; the rest of it is just a prompt.
HARNESS_EVAL = """
import json

from proctor import case, command, profile, suite, variant

AGENTS = {agents!r}
RUN = 'bash "$PROCTOR_PROFILE_DIR/${{SPHYNX_PROMPT%% *}}"'
full = variant("command", name="full", model="openai/gpt-5.5", profile=profile(
    "full", dir=AGENTS, run=RUN, system_prompt="Be terse.",
    env={{"GREETING": "hello from the profile", "INSTALL_LOG": {install_log!r}}},
    install='echo installed >> "$HOME/installed"; echo "$SPHYNX_HOME" >> "$INSTALL_LOG"',
))
bare = variant("command", name="bare", profile=profile("bare", dir=AGENTS, run=RUN))


def report_facts(ctx):
    facts = dict(line.split("=", 1) for line in ctx.read_text("facts.txt").splitlines())
    return {{"passed": True, "message": json.dumps(facts)}}


environment = suite(
    "environment", prompt="env_report.sh {{{{note}}}}", trials=2, variants=[full, bare],
    cases=[case("env-report", variables={{"note": "with 'quotes', $HOME and \\\\ kept verbatim"}},
                validate=report_facts)],
)
suite_prompt = suite(
    "suite-prompt", prompt="env_report.sh", system_prompt="Suite rules.", variants=[bare],
    cases=[case("env-report-suite-prompt", validate=report_facts)],
)
protocol = suite(
    "protocol", prompt="{{{{agent}}}} go", variants=[full],
    cases=[
        case("echo-only", variables={{"agent": "echo_agent.sh"}}, validate=command("grep -q 'total = 6' total.ts")),
        case("protocol-errors", variables={{"agent": "protocol_errors.sh"}}, validate=command("true")),
        case("no-finished", variables={{"agent": "no_finished.sh"}}, validate=command("true")),
        case("traced", variables={{"agent": "traced.sh"}}, validate=command("test -f nested/file.txt")),
    ],
)
"""


@dataclass
class HarnessBatch:
    backend: Backend
    report: dict[str, Any]
    install_log: Path

    def run(self, case: str, variant: str | None = None) -> dict[str, Any]:
        runs = [
            r for r in self.report["runs"] if r["case"] == case and variant in (None, r["variant"])
        ]
        assert len(runs) == 1, runs
        return runs[0]

    def trial_id(self, case: str) -> int:
        (trial_id,) = self.backend.trial_ids(self.report["batch"], case)
        return trial_id

    def events(self, case: str) -> list[tuple[str, dict[str, Any]]]:
        return self.backend.events(self.trial_id(case))

    def journal(self, case: str) -> list[tuple[str, dict[str, Any]]]:
        """The agent's events, without Proctor's own Log notes (install output, audits)."""
        return [(kind, data) for kind, data in self.events(case) if kind != "Log"]

    def trial_row(self, case: str, *columns: str) -> tuple:
        (row,) = self.backend.rows(
            f"SELECT {', '.join(columns)} FROM evals_app_trial WHERE id = ?", self.trial_id(case)
        )
        return row


@pytest.fixture(scope="module")
def harness_batch(module_backend: Backend, tmp_path_factory) -> HarnessBatch:
    folder = tmp_path_factory.mktemp("harness")
    install_log = folder / "installs.log"
    write_eval(
        folder,
        "harness.eval.py",
        HARNESS_EVAL.format(agents=str(AGENTS), install_log=str(install_log)),
    )
    # Something waits on stdin: a process that inherited it would read this line.
    result = module_backend.eval(folder, "--json", stdin="a line the agent must never read\n")
    assert result.returncode == 0, result.stderr
    return HarnessBatch(module_backend, json.loads(result.stdout), install_log)


def facts_of(trial: dict[str, Any]) -> dict[str, str]:
    (check,) = trial["checks"]
    return json.loads(check["message"])


def test_the_process_gets_the_protocols_environment(harness_batch: HarnessBatch):
    full = [facts_of(t) for t in harness_batch.run("env-report", "full")["trials"]]
    bare = [facts_of(t) for t in harness_batch.run("env-report", "bare")["trials"]]

    for facts in full + bare:
        assert facts["prompt"] == "env_report.sh with 'quotes', $HOME and \\ kept verbatim"
        assert facts["home"] == facts["HOME"]
        assert facts["workspace"] == facts["cwd"], "the process starts in the workspace"
        assert facts["workspace"] != facts["home"]
        assert facts["trace_log"].startswith(facts["home"] + "/")
        assert facts["trace_log_written"] == "yes"
        assert facts["stdin"] == "<closed>"
    for facts in full:
        assert facts["model"] == "openai/gpt-5.5"
        assert facts["system_prompt"] == "Be terse."
        assert facts["greeting"] == "hello from the profile"
        assert facts["installs_in_this_home"] == "1"
    for facts in bare:
        assert facts["model"] == ""
        assert facts["system_prompt_file"] == "<unset>"
        assert facts["greeting"] == "<unset>"
        assert facts["installs_in_this_home"] == "0"
    # Every trial had its own sandbox.
    assert len({facts["workspace"] for facts in full + bare}) == 4
    assert len({facts["home"] for facts in full + bare}) == 4


def test_a_suite_system_prompt_reaches_the_process_as_a_file(harness_batch: HarnessBatch):
    (trial,) = harness_batch.run("env-report-suite-prompt")["trials"]

    facts = facts_of(trial)

    assert facts["system_prompt"] == "Suite rules."
    assert facts["system_prompt_file"].startswith(facts["home"] + "/")


def test_install_runs_once_in_each_sandbox(harness_batch: HarnessBatch):
    full_trials = sum(
        len(r["trials"]) for r in harness_batch.report["runs"] if r["variant"] == "full"
    )

    homes = harness_batch.install_log.read_text().splitlines()

    assert len(homes) == full_trials == 6
    assert len(set(homes)) == len(homes)


def test_an_echo_only_runner_is_recorded_event_by_event(harness_batch: HarnessBatch):
    (trial,) = harness_batch.run("echo-only")["trials"]
    events = harness_batch.events("echo-only")
    agent_events = [
        (kind, data) for kind, data in events if kind != "Log" and data.get("origin") != "trace"
    ]

    assert trial["status"] == "passed"
    assert (trial["answer"], trial["finish_reason"]) == ("Fixed the total.", "done")
    assert trial["usage"] == {"input_tokens": 9120, "output_tokens": 312}
    assert [kind for kind, _ in agent_events] == [
        "Started",
        "Message",
        "Command",
        "FileChange",
        "ToolCall",
        "Usage",
        "Message",
        "Finished",
    ]
    started, _, command, file_change, tool_call, usage, _, finished = (
        data for _, data in agent_events
    )
    assert started == {"session_id": "run-42", "model": "openai/gpt-5.5"}
    assert command == {
        "command": "bun test",
        "exit_code": 1,
        "output": "expect(5).toBe(6)\n",
        "origin": "agent",
    }
    assert file_change["paths"][0].endswith("/workspace/total.ts")
    assert tool_call == {
        "call_id": "call_7",
        "name": "search",
        "input": '{"query":"total"}',
        "output": None,
        "error": None,
        "status": "completed",
    }
    assert usage["cache_read_tokens"] == 8000 and usage["total_tokens"] == 9432
    assert finished == {"reason": "done"}
    assert agent_events[-1][0] == "Finished", "the journal ends with Finished"
    assert harness_batch.trial_row("echo-only", "session_id", "cache_read_tokens") == (
        "run-42",
        8000,
    )
    # The Finished line's own time is kept.
    finished_at = harness_batch.backend.scalar(
        "SELECT at FROM evals_app_event WHERE trial_id = ? AND kind = 'Finished'",
        harness_batch.trial_id("echo-only"),
    )
    assert str(finished_at).startswith("2026-09-01 22:00:05")  # 1788300005000 ms
    folder = trial_folder(
        harness_batch.backend, harness_batch.report["batch"], harness_batch.trial_id("echo-only")
    )
    raw_events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in raw_events] == [kind for kind, _ in events]


def test_known_tags_with_wrong_fields_are_protocol_errors_and_other_lines_only_logged(
    harness_batch: HarnessBatch,
):
    (trial,) = harness_batch.run("protocol-errors")["trials"]
    events = harness_batch.events("protocol-errors")
    errors = [data for kind, data in events if kind == "ProtocolError"]
    folder = trial_folder(
        harness_batch.backend,
        harness_batch.report["batch"],
        harness_batch.trial_id("protocol-errors"),
    )
    output_log = (folder / "output.log").read_text()

    assert [e["error"].split(":")[0] for e in errors] == ["Usage", "Message", "ToolCall"]
    assert errors[0]["line"] == '{"_tag":"Usage","inputTokens":-1,"outputTokens":2}'
    assert trial["answer"] == "still answering"
    assert trial["status"] == "passed"
    assert trial["usage"] == {"input_tokens": 0, "output_tokens": 0}
    not_events = [
        "plain logging, not an event",
        '{"note":"json without a tag"}',
        '{"_tag":"Unknown","x":1}',
    ]
    for line in not_events:
        assert line in output_log.splitlines()
        assert not any(
            line in json.dumps(data) for kind, data in events if data.get("origin") != "trace"
        )


def test_a_process_that_never_finishes_is_scored_with_exit_n(harness_batch: HarnessBatch):
    (trial,) = harness_batch.run("no-finished")["trials"]
    events = harness_batch.journal("no-finished")

    assert trial["finish_reason"] == "exit 3"
    assert trial["status"] == "passed", "a non-zero exit does not fail the trial; its checks decide"
    assert trial["answer"] == "gave up"
    assert events[-1] == ("Finished", {"reason": "exit 3"})
    assert [kind for kind, _ in events].count("Finished") == 1


def test_the_shell_recorder_records_traced_commands_once(harness_batch: HarnessBatch):
    (trial,) = harness_batch.run("traced")["trials"]
    commands = [data for kind, data in harness_batch.events("traced") if kind == "Command"]
    traced = {c["command"] for c in commands if c["origin"] == "trace"}

    assert trial["status"] == "passed"
    assert [c for c in commands if c["command"] == "touch made.txt"] == [
        {"command": "touch made.txt", "exit_code": 0, "output": "", "origin": "agent"}
    ], "a traced command the agent printed itself is recorded once, as printed"
    assert {
        "ls > /dev/null",
        "bash -c 'mkdir -p nested && echo inner > nested/file.txt'",
        "mkdir -p nested",
        "echo inner > nested/file.txt",
    } <= traced
    assert all(c["exit_code"] is None for c in commands if c["origin"] == "trace")
    assert harness_batch.journal("traced")[-1][0] == "Finished"


def test_a_profile_run_names_its_script_relative_to_the_profile_folder(
    sqlite_backend: Backend, tmp_path: Path
):
    write_eval(
        tmp_path,
        "kit.eval.py",
        f"""
    from proctor import command, files, profile, suite, variant, case

    s = suite("kit", prompt="Add a /health route", source=files({{"app/routes.py": "ROUTES = {{}}\\n"}}),
              cases=[case("relative-run", validate=command("grep -q health app/routes.py"))],
              variants=[variant("command", profile=profile("kit", dir={str(AGENTS)!r}, run="python3 kit_agent.py"))])
    """,
    )

    report = sqlite_backend.eval_json(tmp_path)

    (trial,) = only_run(report, "relative-run")["trials"]
    assert trial["finish_reason"] == "done"
    assert trial["status"] == "passed"
