"""The runner's core without a database: runner.trial.execute.execute_trial reporting to a
MemoryRecorder, with real agent processes in a local sandbox."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

from ceilings import finishes
from process_state import running

from evals_app.resolution import resolve_case
from proctor import Verdict, case, command, files, profile, suite, variant
from proctor.definitions import Case, Variant
from runner.core.reporting import MemoryRecorder
from runner.harnesses import TurnRequest, create_harness
from runner.sandboxes import create_sandbox
from runner.trial.execute import TrialPlan, execute_trial

AGENTS = Path(__file__).resolve().parent / "e2e" / "agents"


def script_variant(script: str, **fields) -> Variant:
    runner = "bash" if script.endswith(".sh") else "python3"
    return variant(
        "command",
        profile=profile(
            script, dir=str(AGENTS), run=f'{runner} "$PROCTOR_PROFILE_DIR/{script}"', **fields
        ),
    )


def inline_variant(run: str, **fields) -> Variant:
    return variant("command", profile=profile("inline", run=run, **fields))


def run_trial(
    tmp_path: Path,
    the_case: Case,
    the_variant: Variant,
    *,
    prompt: str = "Fix the total",
    **suite_fields,
) -> MemoryRecorder:
    the_suite = suite(
        "core", prompt=prompt, cases=[the_case], variants=[the_variant], **suite_fields
    )
    plan = TrialPlan(
        resolved=resolve_case(the_suite, the_case, Path(__file__)),
        variant=the_variant,
        index=0,
        cache_root=tmp_path / "cache",
        git_host="https://git.invalid",
    )
    recorder = MemoryRecorder()
    returned = execute_trial(plan, recorder)
    assert recorder.outcome is returned
    return recorder


def check_results(recorder: MemoryRecorder) -> dict[str, tuple[bool, str]]:
    return {c.name: (c.passed, c.message) for c in recorder.checks}


def kinds(recorder: MemoryRecorder) -> list[str]:
    return [event.kind for _, event in recorder.events if event.data.get("origin") != "trace"]


# --- a whole trial ---------------------------------------------------------------------------


def test_it_runs_an_echo_only_runner_to_a_passed_trial(tmp_path):
    recorder = run_trial(
        tmp_path,
        case("echo", validate=command("grep -q 'total = 6' total.ts")),
        script_variant("echo_agent.sh"),
    )

    outcome = recorder.outcome
    assert outcome.status == "passed"
    assert (outcome.finish_reason, outcome.answer, outcome.session_id) == (
        "done",
        "Fixed the total.",
        "run-42",
    )
    assert outcome.usage["input_tokens"] == 9120 and outcome.usage["cache_read_tokens"] == 8000
    assert outcome.conversation_outcome == "completed"
    assert recorder.turns == [
        {
            "index": 0,
            "prompt": "Fix the total",
            "origin": {},
            "mode": "",
            "answer": "Fixed the total.",
            "usage": outcome.usage,
        }
    ]
    assert kinds(recorder)[-1] == "Finished"
    assert {"workspace.diff", "conversation.json"} <= set(recorder.artifacts)
    assert "+export const total = 6;" in recorder.artifacts["workspace.diff"]


def test_a_runner_kit_agent_reports_usage_once_and_finishes_once(tmp_path):
    source = files({"app/__init__.py": "", "app/routes.py": "ROUTES = {}\n"})
    recorder = run_trial(
        tmp_path,
        case("kit", source=source, validate=command("grep -q /health app/routes.py")),
        script_variant("kit_agent.py"),
        prompt="Add a /health route",
    )

    assert recorder.outcome.status == "passed"
    assert recorder.outcome.answer == "Added the /health route."
    assert (recorder.outcome.usage["input_tokens"], recorder.outcome.usage["output_tokens"]) == (
        900,
        40,
    )
    assert kinds(recorder).count("Finished") == 1
    assert recorder.outcome.finish_reason == "done"


def test_each_trial_gets_a_fresh_workspace_that_is_removed_afterwards(tmp_path):
    run = 'pwd > seen.txt; echo "{\\"_tag\\":\\"Message\\",\\"text\\":\\"$PWD\\"}"; ls -A | tr "\\n" " " >&2'
    first = run_trial(tmp_path, case("fresh", validate=command("true")), inline_variant(run))
    second = run_trial(tmp_path, case("fresh", validate=command("true")), inline_variant(run))

    assert first.outcome.answer != second.outcome.answer
    assert not Path(first.outcome.answer).exists()
    assert ("stderr", "seen.txt ") in second.raw, (
        "the second workspace starts without the first one's files"
    )


def test_children_left_behind_by_an_agent_that_exits_are_stopped(tmp_path):
    pid_file = tmp_path / "child.pid"
    run = f'sleep 30 & echo $! > {pid_file}; echo \'{{"_tag":"Finished","reason":"done"}}\''

    recorder = run_trial(
        tmp_path, case("leaves-a-child", validate=command("true")), inline_variant(run)
    )

    assert recorder.outcome.status == "passed"
    assert not running(int(pid_file.read_text()))


# --- validators ------------------------------------------------------------------------------


def sync_bool(ctx):
    return ctx.answer() == "Fixed the total."


async def async_verdict(ctx):
    await asyncio.sleep(0)
    return Verdict(True, "async ran", score=0.5)


def returns_a_dict(ctx):
    return {"passed": True, "message": "dicts work too"}


def returns_nothing(ctx):
    return None


# Each of these errored the whole trial (the message, passed) or passed it (the score).
def verdict_message_not_text(ctx):
    return Verdict(True, 5)


def verdict_passed_not_a_bool(ctx):
    return Verdict("yes")


def verdict_score_past_one(ctx):
    return Verdict(True, score=1.5)


def raises(ctx):
    raise KeyError("missing-route")


def reads_a_parent_path(ctx):
    return ctx.read_text("../home/.proctor/shell_recorder.sh") != ""


def reads_an_absolute_path(ctx):
    return ctx.read_text("/etc/hostname") != ""


def reads_through_a_symlink(ctx):
    return ctx.read_text("escape-link") != ""


def exists_refuses_outside(ctx):
    return Verdict(
        not ctx.exists("/etc/hostname") and not ctx.exists("escape-link") and ctx.exists("total.ts")
    )


def exec_runs_in_the_workspace(ctx):
    result = ctx.exec("pwd; cat total.ts; exit 5")
    return Verdict(
        result.exit_code == 5
        and result.output.splitlines() == [ctx.workspace, "export const total = 6;"],
        f"exit {result.exit_code}",
    )


def transcript_and_turns(ctx):
    (turn,) = ctx.turns()
    return (
        ctx.transcript() == "Reading the failing test first.\n\nFixed the total."
        and turn.prompt == "Fix the total"
        and turn.answer == "Fixed the total."
        # The agent reports total.ts; the run's own `ln -s` shows from the workspace compare.
        and turn.file_changes == [ctx.workspace + "/total.ts", ctx.workspace + "/escape-link"]
        and turn.tool_calls[0]["call_id"] == "call_7"
        and turn.usage["output_tokens"] == 312
    )


def prints_something(ctx):
    print("validator output line")
    return True


def shares_work_first(ctx):
    ctx.shared = "set by the first check"
    return True


def shares_work_second(ctx):
    return getattr(ctx, "shared", None) == "set by the first check"


ALL_VALIDATORS = [
    sync_bool,
    async_verdict,
    returns_a_dict,
    returns_nothing,
    verdict_message_not_text,
    verdict_passed_not_a_bool,
    verdict_score_past_one,
    raises,
    reads_a_parent_path,
    reads_an_absolute_path,
    reads_through_a_symlink,
    exists_refuses_outside,
    exec_runs_in_the_workspace,
    transcript_and_turns,
    prints_something,
    shares_work_first,
    shares_work_second,
]


def test_every_validator_runs_and_one_failure_fails_the_trial(tmp_path):
    agent = script_variant("echo_agent.sh")
    # The agent also leaves a symlink pointing out of the workspace.
    agent = variant(
        "command",
        profile=profile(
            "linker",
            dir=str(AGENTS),
            run='ln -s /etc/hostname escape-link; bash "$PROCTOR_PROFILE_DIR/echo_agent.sh"',
        ),
    )

    recorder = run_trial(tmp_path, case("all-kinds", validate=ALL_VALIDATORS), agent)

    results = check_results(recorder)
    assert list(results) == [v.__name__ for v in ALL_VALIDATORS], "every check ran, in order"
    assert recorder.outcome.status == "failed"
    assert results["sync_bool"] == (True, "")
    assert results["async_verdict"] == (True, "async ran")
    assert results["returns_a_dict"] == (True, "dicts work too")
    assert results["returns_nothing"][0] is False
    assert "bool or a Verdict" in results["returns_nothing"][1]
    assert results["verdict_message_not_text"] == (
        False,
        "TypeError: returned a Verdict whose message is 5; the message is text (a score goes in "
        "score=)",
    )
    assert results["verdict_passed_not_a_bool"] == (
        False,
        "TypeError: returned Verdict(passed='yes'); passed is True or False",
    )
    assert results["verdict_score_past_one"] == (
        False,
        "ValueError: returned a Verdict whose score is 1.5; a score is 0 to 1",
    )
    assert results["raises"] == (False, "KeyError: 'missing-route'")
    for name in ("reads_a_parent_path", "reads_an_absolute_path", "reads_through_a_symlink"):
        passed, message = results[name]
        assert not passed and "outside the workspace" in message, (name, message)
    assert results["exists_refuses_outside"][0] is True
    assert results["exec_runs_in_the_workspace"] == (True, "exit 5")
    assert results["transcript_and_turns"][0] is True
    assert results["shares_work_second"][0] is True
    printed = next(c for c in recorder.checks if c.name == "prints_something")
    assert printed.output == "validator output line\n"
    assert printed.kind == "validator" and printed.source_ref["qualname"] == "prints_something"
    assert next(c for c in recorder.checks if c.name == "async_verdict").score == 0.5


def test_a_command_check_passes_on_exit_0_and_keeps_its_output(tmp_path):
    passing = run_trial(
        tmp_path,
        case("ok", validate=command("echo checked; cat total.ts")),
        script_variant("echo_agent.sh"),
    )
    failing = run_trial(
        tmp_path,
        case("not-ok", validate=command("echo nope >&2; exit 9", name="strict")),
        script_variant("echo_agent.sh"),
    )

    (ok,) = passing.checks
    (not_ok,) = failing.checks
    assert (ok.passed, ok.kind, ok.message, ok.output) == (
        True,
        "command",
        "exited 0",
        "checked\nexport const total = 6;\n",
    )
    assert (not_ok.name, not_ok.passed, not_ok.message, not_ok.output) == (
        "strict",
        False,
        "exited 9",
        "nope\n",
    )
    assert (passing.outcome.status, failing.outcome.status) == ("passed", "failed")


def test_a_command_check_past_its_time_limit_fails_saying_the_limit_it_was_given(tmp_path):
    recorder = run_trial(
        tmp_path,
        case("slow-check", validate=command("sleep 30", timeout_ms=1500)),
        script_variant("echo_agent.sh"),
    )

    (check,) = recorder.checks
    # The limit as given, not rounded down to whole seconds ("1s").
    assert (check.passed, check.message) == (False, "timed out after 1.5s")
    assert recorder.outcome.status == "failed"


# --- time limits -----------------------------------------------------------------------------


def test_an_agent_past_its_time_limit_is_timed_out_with_its_children_gone(tmp_path):
    pid_file = tmp_path / "child.pid"
    run = (
        f'trap "" TERM; sleep 300 & echo $! > {pid_file}; '
        'echo \'{"_tag":"Message","text":"partial"}\'; sleep 60'
    )

    recorder = run_trial(
        tmp_path, case("slow", timeout_ms=1000, validate=command("true")), inline_variant(run)
    )

    assert recorder.outcome.status == "timed_out"
    assert recorder.outcome.finish_reason == "timed out"
    assert recorder.outcome.conversation_outcome == "timed_out"
    assert recorder.checks == []
    assert recorder.outcome.answer == "partial"
    assert not running(int(pid_file.read_text()))


# --- the command harness protocol ------------------------------------------------------------


def test_protocol_errors_are_events_and_other_lines_stay_in_the_raw_output(tmp_path):
    recorder = run_trial(
        tmp_path, case("errors", validate=command("true")), script_variant("protocol_errors.sh")
    )

    errors = [event.data for _, event in recorder.events if event.kind == "ProtocolError"]
    assert [e["error"] for e in errors] == [
        "Usage: field 'inputTokens' must be a whole number, zero or more",
        "Message: missing field 'text'",
        "ToolCall: missing field 'callId' (it may be null)",
    ]
    assert ("stdout", "plain logging, not an event") in recorder.raw
    assert "plain logging" not in repr(
        [e for _, e in recorder.events if e.data.get("origin") != "trace"]
    )


def test_event_lines_on_stderr_are_not_events(tmp_path):
    run = 'echo \'{"_tag":"Message","text":"from stderr"}\' >&2; echo \'{"_tag":"Message","text":"from stdout"}\''

    recorder = run_trial(tmp_path, case("streams", validate=command("true")), inline_variant(run))

    assert recorder.outcome.answer == "from stdout"
    assert ("stderr", '{"_tag":"Message","text":"from stderr"}') in recorder.raw


def test_without_finished_the_reason_is_the_exit_code_and_checks_decide(tmp_path):
    recorder = run_trial(
        tmp_path, case("exits", validate=command("true")), script_variant("no_finished.sh")
    )

    assert (recorder.outcome.status, recorder.outcome.finish_reason) == ("passed", "exit 3")
    assert [e.data for _, e in recorder.events if e.kind == "Finished"] == [{"reason": "exit 3"}]


def test_the_shell_recorder_is_cleared_between_turns(tmp_path):
    the_variant = inline_variant(
        'if [ "$SPHYNX_PROMPT" = first ]; then mkdir first-dir; else mkdir second-dir; fi'
    )
    harness = create_harness(the_variant)
    sandbox = create_sandbox(the_variant)
    try:
        harness.setup(sandbox, lambda stream, line: None)
        turns = []
        for index, prompt in enumerate(["first", "second"]):
            events = []
            harness.run_turn(
                sandbox,
                TurnRequest(prompt=prompt, index=index, model=None),
                emit=events.append,
                raw=lambda stream, line: None,
                timeout_s=30,
            )
            turns.append({e.data["command"] for e in events if e.kind == "Command"})
    finally:
        sandbox.destroy()

    assert "mkdir first-dir" in turns[0] and "mkdir second-dir" not in turns[0]
    assert "mkdir second-dir" in turns[1] and "mkdir first-dir" not in turns[1]


def test_the_local_agents_home_keeps_nothing_of_proctors_after_a_turn(tmp_path):
    # The agent lists its home while its own commands are being traced: the trace log is the
    # one thing of Proctor's there, and it is gone once the turn has been read.
    the_variant = inline_variant('ls -A "$HOME" > "$SPHYNX_WORKSPACE/seen.txt"; true')
    harness = create_harness(the_variant)
    sandbox = create_sandbox(the_variant)
    try:
        harness.setup(sandbox, lambda stream, line: None)
        events = []
        harness.run_turn(
            sandbox,
            TurnRequest(prompt="look", index=0, model=None),
            emit=events.append,
            raw=lambda stream, line: None,
            timeout_s=30,
        )
        seen_during = (sandbox.host_workspace / "seen.txt").read_text().split()
        left_after = sorted(path.name for path in sandbox.host_home.iterdir())
    finally:
        sandbox.destroy()

    assert seen_during == [".proctor-trace.log"]
    assert left_after == []
    assert any(e.kind == "Command" and e.data["command"].startswith("ls -A") for e in events)


def test_a_trace_log_the_agent_swapped_is_removed_never_followed(tmp_path):
    # An agent that puts a link, a second name, a FIFO or a folder where its trace log was:
    # Proctor neither touches the file behind it nor hangs reading it (opening a FIFO waits for
    # a writer: the trial hung there for good); what the agent made goes, the file stays.
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    # Each swap is the agent's last command: its shell's trap would write through it next.
    swaps = [
        f'ln -sf {precious} "$SPHYNX_TRACE_LOG"',
        f'ln -f {precious} "$SPHYNX_TRACE_LOG"',
        'mkfifo "$HOME/fifo" && mv -f "$HOME/fifo" "$SPHYNX_TRACE_LOG"',
        'python3 -c "import os, sys; os.remove(sys.argv[1]); os.mkdir(sys.argv[1])" '
        '"$SPHYNX_TRACE_LOG"',
    ]
    for swap in swaps:
        the_variant = inline_variant(swap)
        harness = create_harness(the_variant)
        sandbox = create_sandbox(the_variant)
        try:
            harness.setup(sandbox, lambda stream, line: None)
            for index in range(2):
                # Under a ceiling: a reader that waits on the FIFO fails here, not the whole run.
                finishes(
                    partial(
                        harness.run_turn,
                        sandbox,
                        TurnRequest(prompt="swap", index=index, model=None),
                        emit=lambda event: None,
                        raw=lambda stream, line: None,
                        timeout_s=30,
                    ),
                    what=f"a turn after `{swap}`",
                )
                log = sandbox.host_home / ".proctor-trace.log"
                assert not log.is_symlink() and not log.exists(), swap
        finally:
            sandbox.destroy()
        assert precious.read_text().startswith("keep me\n"), swap


def test_the_system_prompt_file_is_set_only_when_there_is_a_system_prompt(tmp_path):
    run = (
        'if [ -n "${SPHYNX_SYSTEM_PROMPT_FILE+set}" ]; then text=$(cat "$SPHYNX_SYSTEM_PROMPT_FILE"); '
        'else text=none; fi; echo "{\\"_tag\\":\\"Message\\",\\"text\\":\\"$text\\"}"'
    )

    without = run_trial(tmp_path, case("plain", validate=command("true")), inline_variant(run))
    from_profile = run_trial(
        tmp_path,
        case("plain", validate=command("true")),
        inline_variant(run, system_prompt="From the profile."),
    )
    from_suite = run_trial(
        tmp_path,
        case("plain", validate=command("true")),
        inline_variant(run),
        system_prompt="From the suite.",
    )

    assert without.outcome.answer == "none"
    assert from_profile.outcome.answer == "From the profile."
    assert from_suite.outcome.answer == "From the suite."


def test_the_process_gets_every_variable_of_the_case_with_credentials_redacted(tmp_path):
    run = (
        'python3 -c \'import json, os; text = os.environ["PROCTOR_CASE_VARS"]; '
        'key = json.loads(text)["api_key"]; '
        'print(json.dumps({"_tag": "Message", "text": text})); '
        'print(json.dumps({"_tag": "Message", "text": "the key is " + key}))\''
    )
    variables = {"topic": "bees", "count": 3, "api_key": "hunter2-hunter2"}

    recorder = run_trial(
        tmp_path,
        case("vars", variables=variables, validate=command("true")),
        inline_variant(run),
        prompt="Write about {{topic}}",
    )

    texts = [event.data["text"] for _turn, event in recorder.events if event.kind == "Message"]
    assert texts == [
        '{"api_key": "[redacted]", "count": 3, "topic": "bees"}',
        "the key is [redacted]",
    ]


def test_variables_too_large_for_the_environment_reach_the_process_in_a_file(tmp_path):
    # One environment string past 128 KiB and Linux would not start the process at all.
    run = (
        "python3 -c 'import json, os; "
        'text = open(os.environ["PROCTOR_CASE_VARS_FILE"]).read(); '
        'print(json.dumps({"_tag": "Message", "text": str(len(json.loads(text)["doc"]))}))\''
    )

    recorder = run_trial(
        tmp_path,
        case("large", variables={"doc": "x" * 200_000}, validate=command("true")),
        inline_variant(run),
    )

    assert (recorder.outcome.finish_reason, recorder.outcome.answer) == ("exit 0", "200000")


# --- infrastructure failures are errored, not failed -----------------------------------------


def test_a_failing_install_errors_the_trial(tmp_path):
    recorder = run_trial(
        tmp_path,
        case("install", validate=command("true")),
        inline_variant("true", install="echo cannot reach the mirror >&2; exit 7"),
    )

    assert (recorder.outcome.status, recorder.outcome.finish_reason) == (
        "errored",
        "infrastructure",
    )
    assert "install exited 7" in recorder.outcome.error
    assert "cannot reach the mirror" in recorder.outcome.error
    assert recorder.checks == [] and recorder.turns == []


def test_a_profile_folder_that_does_not_exist_errors_the_trial(tmp_path):
    missing = variant("command", profile=profile("gone", dir=str(tmp_path / "gone"), run="true"))

    recorder = run_trial(tmp_path, case("gone", validate=command("true")), missing)

    assert recorder.outcome.status == "errored"
    assert "does not exist" in recorder.outcome.error


def failing_prepare(ctx):
    print("about to fail")
    raise RuntimeError("the fixture database is down")


def test_a_prepare_that_raises_errors_the_trial_before_the_agent_runs(tmp_path):
    recorder = run_trial(
        tmp_path,
        case("prep", prepare=failing_prepare, validate=command("true")),
        script_variant("echo_agent.sh"),
    )

    assert recorder.outcome.status == "errored"
    assert recorder.outcome.error == "prepare raised RuntimeError: the fixture database is down"
    assert recorder.turns == [] and recorder.checks == []
    assert "about to fail" in recorder.logs


def prepare_with_a_failing_command(ctx):
    ctx.exec("echo compiling; exit 4")


def test_a_prepare_command_that_fails_errors_the_trial_with_its_output(tmp_path):
    recorder = run_trial(
        tmp_path,
        case("prep", prepare=prepare_with_a_failing_command, validate=command("true")),
        script_variant("echo_agent.sh"),
    )

    assert recorder.outcome.status == "errored"
    assert recorder.outcome.error == "prepare: `echo compiling; exit 4` exited 4: compiling"


# --- prepare ---------------------------------------------------------------------------------


async def prepare_with_every_helper(ctx):
    ctx.write_text("config/settings.txt", "mode=test\n")
    listed = ctx.exec("ls", ["config"])
    soft = ctx.exec("exit 3", check=False)
    return {
        "workspace": ctx.workspace,
        "cached": ctx.cached,
        "listed": listed.output.strip(),
        "soft_exit": soft.exit_code,
        "exists": ctx.exists("config/settings.txt"),
        "text": ctx.read_text("config/settings.txt"),
    }


def sees_what_prepare_returned(ctx):
    expected = {
        "workspace": ctx.workspace,
        "cached": False,
        "listed": "settings.txt",
        "soft_exit": 3,
        "exists": True,
        "text": "mode=test\n",
    }
    return Verdict(ctx.prepared == expected, repr(ctx.prepared))


def test_an_async_prepare_gets_its_helpers_and_its_value_reaches_validators(tmp_path):
    recorder = run_trial(
        tmp_path,
        case("prep", prepare=prepare_with_every_helper, validate=sees_what_prepare_returned),
        script_variant("echo_agent.sh"),
    )

    assert recorder.outcome.status == "passed", check_results(recorder)


def prepare_returning_a_key(ctx):
    key = "tk_" + "5f0c" * 6
    ctx.write_text(".prepared-secret", key)
    print(f"created {key}")
    return {"api_key": key}


def validator_using_the_key(ctx):
    print(f"using {ctx.prepared['api_key']}")
    return Verdict(ctx.prepared["api_key"] in ctx.answer(), f"saw {ctx.prepared['api_key']}")


def test_what_prepare_returns_is_redacted_from_everything_reported(tmp_path):
    recorder = run_trial(
        tmp_path,
        case("secret", prepare=prepare_returning_a_key, validate=validator_using_the_key),
        script_variant("secret_agent.sh"),
    )

    assert recorder.outcome.status == "passed"
    assert ("tk_" + "5f0c" * 6) not in recorder.everything_said()
    assert recorder.outcome.answer == "the key is [redacted]"
    assert recorder.checks[0].message == "saw [redacted]"
    assert "created [redacted]" in recorder.logs


def test_a_secret_in_the_session_id_is_redacted_too(tmp_path):
    run = 's=$(cat .prepared-secret); echo "{\\"_tag\\":\\"Started\\",\\"sessionId\\":\\"session-$s\\"}"'

    recorder = run_trial(
        tmp_path,
        case("secret", prepare=prepare_returning_a_key, validate=command("true")),
        inline_variant(run),
    )

    assert ("tk_" + "5f0c" * 6) not in recorder.everything_said()
