"""`proctor eval` end to end: the seed's example suite, what the command prints, which files it
finds, and its options (--trials, --case, --variant, -j, --fail-under)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import PROCTOR

from e2e.running import Backend, agent_profile, only_run, write_eval, write_quick_eval

# The shape `--json` documents; more keys are allowed.
REPORT_KEYS = {"batch", "runs"}
RUN_KEYS = {"suite", "case", "case_version", "variant", "trials"}
TRIAL_KEYS = {"index", "status", "finish_reason", "duration_ms", "answer", "usage", "checks"}
USAGE_KEYS = {"input_tokens", "output_tokens"}
CHECK_KEYS = {"name", "kind", "passed", "message"}

HEALTH_TEST = """\
import sys

sys.path.insert(0, ".")
from app.routes import ROUTES

if ROUTES.get("/health") != 200:
    sys.exit("no /health route")
"""


def git(folder: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Alice",
        "GIT_AUTHOR_EMAIL": "alice@example.com",
        "GIT_COMMITTER_NAME": "Alice",
        "GIT_COMMITTER_EMAIL": "alice@example.com",
    }
    return subprocess.run(
        ["git", *args], cwd=folder, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture
def api_repo(tmp_path: Path, git_available) -> tuple[Path, str]:
    """A local repository whose first commit is the app to fix; the later commit breaks it, so
    only a checkout of the pinned ref passes."""
    repo = tmp_path / "acme-api"
    (repo / "app").mkdir(parents=True)
    (repo / "test").mkdir()
    (repo / "app" / "__init__.py").write_text("")
    (repo / "app" / "routes.py").write_text('ROUTES = {"/": 200}\n')
    (repo / "test" / "health_test.py").write_text(HEALTH_TEST)
    git(repo, "init", "--quiet", "--initial-branch=main")
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "-m", "the app")
    pinned = git(repo, "rev-parse", "--short=7", "HEAD")
    (repo / "app" / "routes.py").write_text('raise SystemExit("this is not the pinned commit")\n')
    git(repo, "commit", "--quiet", "-am", "a later commit")
    return repo, pinned


def seed_suite(repo: Path, ref: str) -> str:
    """The seed's example suite in Python: suite "api", case "health-route", prompt "{{task}}",
    a repo() source at a pinned ref, a command() check, one variant, three trials. A second case
    overrides the suite's source with files()."""
    return f"""
    from proctor import case, command, files, profile, repo, suite, variant

    HEALTH_TEST = {HEALTH_TEST!r}

    api = suite(
        "api",
        source=repo({f"{repo}@{ref}"!r}),
        prompt="{{{{task}}}}",
        cases=[
            case(
                "health-route",
                variables={{"task": "Add a /health route that returns 200"}},
                validate=command("python3 test/health_test.py"),
            ),
            case(
                "health-files",
                variables={{"task": "Add a /health route that returns 200"}},
                source=files({{"app/__init__.py": "", "app/routes.py": "ROUTES = {{}}\\n",
                               "test/health_test.py": HEALTH_TEST}}),
                validate=command("python3 test/health_test.py"),
            ),
        ],
        variants=[variant("command", model="model-id", profile={agent_profile("kit_agent.py", name="kit")})],
        trials=3,
    )
    """


def test_it_runs_the_seed_example_suite_and_prints_only_the_documented_json(
    backend: Backend, tmp_path, api_repo
):
    repo, ref = api_repo
    project = tmp_path / "project"
    write_eval(project, "api.eval.py", seed_suite(repo, ref))

    result = backend.eval(project, "--json")

    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1, "stdout holds one line: the JSON report"
    report = json.loads(result.stdout)
    assert set(report) >= REPORT_KEYS
    assert isinstance(report["batch"], int)
    assert [(r["suite"], r["case"], r["variant"]) for r in report["runs"]] == [
        ("api", "health-files", "command:kit:model-id"),
        ("api", "health-route", "command:kit:model-id"),
    ]
    for run in report["runs"]:
        assert set(run) >= RUN_KEYS
        assert run["case_version"] == 1
        assert [t["index"] for t in run["trials"]] == [0, 1, 2]
        for trial in run["trials"]:
            assert set(trial) >= TRIAL_KEYS
            assert set(trial["usage"]) >= USAGE_KEYS
            assert trial["status"] == "passed", trial
            assert trial["finish_reason"] == "done"
            assert trial["answer"] == "Added the /health route."
            assert trial["usage"] == {"input_tokens": 900, "output_tokens": 40}
            assert isinstance(trial["duration_ms"], int) and trial["duration_ms"] >= 0
            (check,) = trial["checks"]
            assert set(check) >= CHECK_KEYS
            assert {key: check[key] for key in CHECK_KEYS} == {
                "name": "python3 test/health_test.py",
                "kind": "command",
                "passed": True,
                "message": "exited 0",
            }
    # The batch is in the database with its six trials, all passed.
    assert backend.rows(
        "SELECT t.status, COUNT(*) FROM evals_app_trial t JOIN evals_app_run r ON t.run_id = r.id "
        "WHERE r.batch_id = ? GROUP BY t.status",
        report["batch"],
    ) == [("passed", 6)]


def test_it_prints_a_case_by_variant_table_without_json(
    sqlite_backend: Backend, tmp_path, api_repo
):
    repo, ref = api_repo
    write_eval(tmp_path, "api.eval.py", seed_suite(repo, ref))

    result = sqlite_backend.eval(tmp_path, "--trials", "1")

    assert result.returncode == 0, result.stderr
    assert "api / health-route" in result.stdout
    assert "api / health-files" in result.stdout
    assert "command:kit:model-id" in result.stdout
    assert result.stdout.count("1/1") == 2
    assert "Artifacts:" in result.stdout
    assert "2 passed" in result.stderr  # the progress line's counts
    assert "Traceback" not in result.stderr


def test_it_finds_eval_files_below_the_current_folder_and_skips_tooling_folders(
    sqlite_backend: Backend, tmp_path
):
    broken = 'raise RuntimeError("this file must never be imported")\n'
    valid = """
    from proctor import suite, case, variant, command
    from e2e_profile import PROFILE

    s = suite("{suite}", prompt="hi", cases=[case("{case}", validate=command("true"))],
              variants=[variant("command", profile=PROFILE)])
    """
    helper = (
        f"from proctor import profile\nPROFILE = {agent_profile('echo_agent.sh', name='echo')}\n"
    )
    (tmp_path / "e2e_profile.py").write_text(helper)
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / "sub" / "deeper" / "e2e_profile.py").write_text(helper)
    write_eval(tmp_path, "top.eval.py", valid.format(suite="top", case="top-case"))
    write_eval(
        tmp_path / "sub" / "deeper", "inner.eval.py", valid.format(suite="inner", case="inner-case")
    )
    for folder in (".git", "node_modules/pkg", ".venv/lib", "myenv"):
        write_eval(tmp_path / folder, "hidden.eval.py", broken)
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / "notes.py").write_text(broken)

    everything = sqlite_backend.eval_json(tmp_path)
    one_folder = sqlite_backend.eval_json(tmp_path, "sub")
    one_file = sqlite_backend.eval_json(tmp_path, "top.eval.py")

    assert sorted(r["case"] for r in everything["runs"]) == ["inner-case", "top-case"]
    assert [r["case"] for r in one_folder["runs"]] == ["inner-case"]
    assert [r["case"] for r in one_file["runs"]] == ["top-case"]


FLAGS_SUITE = f"""
from proctor import suite, case, variant, profile, command

flags = suite(
    "flags",
    prompt="Fix the total",
    cases=[case("passes", validate=command("true")), case("fails", validate=command("false"))],
    variants=[
        variant("command", name="echo-a", profile={agent_profile("echo_agent.sh", name="echo")}),
        variant("command", name="echo-b", profile={agent_profile("echo_agent.sh", name="echo")}),
    ],
    trials=2,
)
"""


@pytest.fixture
def flags_project(tmp_path: Path) -> Path:
    write_eval(tmp_path, "flags.eval.py", FLAGS_SUITE)
    return tmp_path


def shape(report: dict) -> list[tuple[str, str, int]]:
    return [(run["case"], run["variant"], len(run["trials"])) for run in report["runs"]]


def test_it_runs_every_case_under_every_variant_with_the_suites_trials(
    backend: Backend, flags_project
):
    report = backend.eval_json(flags_project)

    assert shape(report) == [
        ("fails", "echo-a", 2),
        ("fails", "echo-b", 2),
        ("passes", "echo-a", 2),
        ("passes", "echo-b", 2),
    ]


def test_it_narrows_the_batch_with_case_variant_and_trials(sqlite_backend: Backend, flags_project):
    one = sqlite_backend.eval_json(
        flags_project, "--case", "passes", "--variant", "echo-b", "--trials", "1"
    )
    both_cases = sqlite_backend.eval_json(
        flags_project, "--case", "passes", "--case", "fails", "--variant", "echo-a", "--trials", "3"
    )

    assert shape(one) == [("passes", "echo-b", 1)]
    assert shape(both_cases) == [("fails", "echo-a", 3), ("passes", "echo-a", 3)]


def test_it_exits_0_when_trials_fail_and_1_only_under_fail_under(
    sqlite_backend: Backend, flags_project
):
    half = ["--variant", "echo-a", "--trials", "1", "--json"]

    plain = sqlite_backend.eval(flags_project, *half)
    at_rate = sqlite_backend.eval(flags_project, *half, "--fail-under", "0.5")
    at_percent = sqlite_backend.eval(flags_project, *half, "--fail-under", "50")
    above_rate = sqlite_backend.eval(flags_project, *half, "--fail-under", "0.51")
    above_percent = sqlite_backend.eval(flags_project, *half, "--fail-under", "60")

    assert [t["status"] for r in json.loads(plain.stdout)["runs"] for t in r["trials"]] == [
        "failed",
        "passed",
    ]
    assert (plain.returncode, at_rate.returncode, at_percent.returncode) == (0, 0, 0)
    assert (above_rate.returncode, above_percent.returncode) == (1, 1)
    # --json still prints the report when the rate is not met.
    assert json.loads(above_rate.stdout)["runs"]
    assert "Traceback" not in above_rate.stderr


def barrier_suite(barrier: Path, wait_s: int) -> str:
    return f"""
    from proctor import suite, case, variant, profile

    def met_another_trial(ctx):
        return ctx.answer() == "met 2"

    s = suite("parallel", prompt="meet", cases=[case("meet", validate=met_another_trial)],
              variants=[variant("command", profile={
        agent_profile(
            "barrier.sh",
            name="barrier",
            env=f'{{"BARRIER_DIR": {str(barrier)!r}, "BARRIER_WAIT_S": "{wait_s}"}}',
        )
    })],
              trials=2)
    """


def test_it_runs_trials_at_once_up_to_j(sqlite_backend: Backend, tmp_path):
    # Two trials meet at a barrier only when they run at the same time.
    together = tmp_path / "together"
    (together / "barrier").mkdir(parents=True)
    write_eval(together, "meet.eval.py", barrier_suite(together / "barrier", wait_s=30))
    one_by_one = tmp_path / "one-by-one"
    (one_by_one / "barrier").mkdir(parents=True)
    write_eval(one_by_one, "meet.eval.py", barrier_suite(one_by_one / "barrier", wait_s=1))

    parallel = sqlite_backend.eval_json(together, "-j", "2")
    serial = sqlite_backend.eval_json(one_by_one, "-j", "1")

    assert [t["answer"] for t in parallel["runs"][0]["trials"]] == ["met 2", "met 2"]
    assert sorted(t["answer"] for t in serial["runs"][0]["trials"]) == ["met 1", "met 2"]


VALIDATORS_SUITE = f"""
import asyncio

from proctor import Verdict, case, profile, suite, variant


def answer_is_the_last_message(ctx):
    return ctx.answer() == "Fixed the total."


async def async_validator(ctx):
    await asyncio.sleep(0)
    return Verdict(True, "async ran")


def verdict_that_fails(ctx):
    return Verdict(False, "total.ts says " + ctx.read_text("total.ts").strip())


def raises(ctx):
    raise RuntimeError("validator blew up")


def reads_outside_the_workspace(ctx):
    ctx.read_text("../../../../../etc/passwd")
    return True


def exec_in_the_workspace(ctx):
    result = ctx.exec("cat total.ts; exit 4")
    return Verdict(result.exit_code == 4 and "total = 6" in result.output, f"exit {{result.exit_code}}")


def transcript_joins_every_message(ctx):
    return ctx.transcript() == "Reading the failing test first.\\n\\nFixed the total."


def turns_hold_what_happened(ctx):
    (turn,) = ctx.turns()
    agent_commands = [c["command"] for c in turn.commands if c["origin"] == "agent"]
    return (turn.prompt == "Fix the total" and agent_commands == ["bun test"]
            and [t["name"] for t in turn.tool_calls] == ["search"]
            and turn.file_changes == [ctx.workspace + "/total.ts"])


def prepared_is_none_without_prepare(ctx):
    return ctx.prepared is None


s = suite(
    "grading",
    prompt="Fix the total",
    cases=[case("every-kind", validate=[
        answer_is_the_last_message, async_validator, verdict_that_fails, raises, reads_outside_the_workspace,
        exec_in_the_workspace, transcript_joins_every_message, turns_hold_what_happened,
        prepared_is_none_without_prepare,
    ])],
    variants=[variant("command", profile={agent_profile("echo_agent.sh", name="echo")})],
)
"""


def test_it_runs_every_validator_and_fails_the_trial_when_one_fails(
    sqlite_backend: Backend, tmp_path
):
    write_eval(tmp_path, "grading.eval.py", VALIDATORS_SUITE)

    report = sqlite_backend.eval_json(tmp_path)

    (trial,) = only_run(report, "every-kind")["trials"]
    assert trial["status"] == "failed"
    checks = {c["name"]: (c["passed"], c["message"]) for c in trial["checks"]}
    assert list(checks) == [
        "answer_is_the_last_message",
        "async_validator",
        "verdict_that_fails",
        "raises",
        "reads_outside_the_workspace",
        "exec_in_the_workspace",
        "transcript_joins_every_message",
        "turns_hold_what_happened",
        "prepared_is_none_without_prepare",
    ]
    assert checks["answer_is_the_last_message"] == (True, "")
    assert checks["async_validator"] == (True, "async ran")
    assert checks["verdict_that_fails"] == (False, "total.ts says export const total = 6;")
    assert checks["raises"] == (False, "RuntimeError: validator blew up")
    assert checks["reads_outside_the_workspace"][0] is False
    assert "outside the workspace" in checks["reads_outside_the_workspace"][1]
    assert checks["exec_in_the_workspace"] == (True, "exit 4")
    assert checks["transcript_joins_every_message"][0] is True
    assert checks["turns_hold_what_happened"][0] is True
    assert checks["prepared_is_none_without_prepare"][0] is True


def test_eval_files_in_two_folders_each_import_their_own_helper_module(
    sqlite_backend: Backend, tmp_path
):
    for name in ("billing", "search"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "shared.py").write_text(f"CASE_ID = '{name}-case'\n")
        write_eval(
            tmp_path / name,
            f"{name}.eval.py",
            f"""
        from proctor import case, command, profile, suite, variant
        from shared import CASE_ID

        s = suite("{name}", prompt="hi", cases=[case(CASE_ID, validate=command("true"))],
                  variants=[variant("command", profile={agent_profile("echo_agent.sh", name="echo")})])
        """,
        )

    report = sqlite_backend.eval_json(tmp_path)

    assert sorted(run["case"] for run in report["runs"]) == ["billing-case", "search-case"]


def test_json_stdout_stays_clean_when_an_eval_file_prints_while_loading(
    sqlite_backend: Backend, tmp_path
):
    write_eval(
        tmp_path,
        "noisy.eval.py",
        f"""
        from proctor import case, command, profile, suite, variant

        print("loading my eval helpers")

        s = suite("noisy", prompt="hi", cases=[case("noisy-case", validate=command("true"))],
                  variants=[variant("command", profile={agent_profile("echo_agent.sh", name="echo")})])
        """,
    )

    report = sqlite_backend.eval_json(tmp_path)

    assert [run["case"] for run in report["runs"]] == ["noisy-case"]


def test_evals_started_together_on_a_new_database_all_run(backend: Backend, tmp_path) -> None:
    """Several `proctor eval`s started at once on a database nobody used yet (a script running a
    project's eval files in parallel): one makes the tables while the others wait for it, and
    every one records and runs its own batch. Each used to make the tables too, and all but one
    stopped with a traceback ("table ... already exists")."""
    write_quick_eval(tmp_path, trials=3)
    started = [
        subprocess.Popen(
            [PROCTOR, "eval", "quick.eval.py", "--json"],
            cwd=tmp_path,
            env=backend.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [process.communicate(timeout=300) for process in started]
    for process, (_, stderr) in zip(started, outputs, strict=True):
        assert process.returncode == 0, stderr
        assert "Traceback" not in stderr
    reports = [json.loads(stdout) for stdout, _ in outputs]
    assert sorted(report["batch"] for report in reports) == [1, 2, 3]
    for report in reports:
        assert [t["status"] for run in report["runs"] for t in run["trials"]] == ["passed"] * 3
    assert backend.scalar("SELECT count(*) FROM evals_app_batch") == 3
