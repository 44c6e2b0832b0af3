"""The e2b sandbox end to end: `proctor eval` drives sandboxes through E2B's official SDK
against a fake E2B on loopback (tests/fakes/e2b_server.py), which speaks the SDK's REST and
envd protocols and runs each sandbox's processes in a folder of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from ceilings import eventually
from conftest import PROCTOR
from fakes.e2b_server import FakeE2B

from e2e.running import AGENTS, Backend, only_run, write_eval

REMOTE_EVAL = f"""
from proctor import case, command, profile, suite, variant

AGENTS = {str(AGENTS)!r}
remote = variant("command", name="remote", sandbox="e2b", template="{{template}}",
                 profile=profile("agents", dir=AGENTS,
                                 run='bash "$PROCTOR_PROFILE_DIR/${{{{SPHYNX_PROMPT%% *}}}}"'))


def total_is_six(ctx):
    text = ctx.read_text("total.ts")
    return {{{{"passed": "total = 6" in text, "message": text.strip()}}}}


s = suite("remote", prompt="{{{{{{{{agent}}}}}}}} go", variants=[remote],
          cases=[case("fix", variables={{{{"agent": "echo_agent.sh"}}}}, validate=total_is_six),
                 case("fix-checked", variables={{{{"agent": "echo_agent.sh"}}}},
                      validate=command("grep -q 'total = 6' total.ts")),
                 case("traced", variables={{{{"agent": "traced.sh"}}}},
                      validate=command("test -f nested/file.txt"))])
"""


@pytest.fixture
def fake_e2b() -> Iterator[FakeE2B]:
    with FakeE2B(templates=("proctor-base",)) as fake:
        yield fake


def run_remote(
    backend: Backend, tmp_path, fake: FakeE2B, template: str = "proctor-base", **env: str
) -> dict[str, Any]:
    write_eval(tmp_path, "remote.eval.py", REMOTE_EVAL.format(template=template))
    result = backend.eval(tmp_path, "--json", extra_env={**fake.sdk_env(), **env})
    assert result.stdout.strip(), result.stderr
    return json.loads(result.stdout)


def test_a_command_agent_runs_in_a_remote_sandbox_and_its_checks_read_its_files(
    sqlite_backend: Backend, tmp_path, fake_e2b: FakeE2B
) -> None:
    report = run_remote(sqlite_backend, tmp_path, fake_e2b)
    (trial,) = only_run(report, "fix")["trials"]
    assert trial["status"] == "passed", trial
    (checked,) = only_run(report, "fix-checked")["trials"]
    assert checked["status"] == "passed", checked
    # The agent's lines were streamed into the event protocol as it printed them.
    (trial_id,) = sqlite_backend.trial_ids(report["batch"], "fix")
    kinds = [kind for kind, _ in sqlite_backend.events(trial_id) if kind != "Log"]
    assert kinds[:3] == ["Started", "Message", "Command"], kinds
    # The shell recorder ran in the remote sandbox: commands the agent never printed are there.
    (traced_id,) = sqlite_backend.trial_ids(report["batch"], "traced")
    traced = {
        data["command"]
        for kind, data in sqlite_backend.events(traced_id)
        if kind == "Command" and data.get("origin") == "trace"
    }
    assert {"ls > /dev/null", "mkdir -p nested"} <= traced, traced
    # The file the agent wrote remotely came back for the diff.
    (diff,) = sqlite_backend.rows(
        "SELECT count(*) FROM evals_app_event WHERE trial_id = ? AND data LIKE '%total.ts%'",
        trial_id,
    )[0]
    assert diff >= 1
    # One sandbox, from the template, killed at the trial's end, recorded with the trial.
    assert [body["templateID"] for body in fake_e2b.created] == ["proctor-base"] * 3
    assert fake_e2b.running() == []
    (recorded,) = sqlite_backend.rows(
        "SELECT remote_sandboxes FROM evals_app_trial WHERE id = ?", trial_id
    )[0]
    assert json.loads(recorded)[0][0] == "e2b"
    assert json.loads(recorded)[0][1] in fake_e2b.killed
    # A re-grade runs the checks on the stored workspaces in fresh remote sandboxes.
    regrade = subprocess.run(
        [PROCTOR, "regrade", str(report["batch"])],
        cwd=tmp_path,
        env={**sqlite_backend.env, **fake_e2b.sdk_env()},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert regrade.returncode == 0, regrade.stderr
    assert "fix × remote trial #1: passed (unchanged)" in regrade.stdout, regrade.stdout
    assert "fix-checked × remote trial #1: passed (unchanged)" in regrade.stdout
    assert len(fake_e2b.created) > 3 and fake_e2b.running() == []


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ({"template": "no-such-template"}, "template 'no-such-template' not found"),
        ({"E2B_API_KEY": "wrong"}, "E2B refused the key in E2B_API_KEY"),
        ({"quota": True}, "E2B's quota or rate limit was reached"),
        ({"E2B_API_URL": "http://127.0.0.1:9"}, "E2B could not be reached"),
    ],
    ids=["unknown-template", "auth", "quota", "network"],
)
def test_a_provider_error_ends_the_trial_errored_in_one_line(
    sqlite_backend: Backend, tmp_path, fake_e2b: FakeE2B, setup: dict, expected: str
) -> None:
    setup = dict(setup)
    template = setup.pop("template", "proctor-base")
    if setup.pop("quota", False):
        fake_e2b.refuse_creates(429, "You have reached the maximum number of sandboxes")
    report = run_remote(sqlite_backend, tmp_path, fake_e2b, template=template, **setup)
    (trial,) = only_run(report, "fix")["trials"]
    assert trial["status"] == "errored", trial
    error = trial["error"]
    assert expected in error, error
    assert "\n" not in error.strip() and "Traceback" not in error, error

    assert fake_e2b.running() == []


def test_limits_and_mocks_are_refused_at_load_saying_why(
    sqlite_backend: Backend, tmp_path, fake_e2b: FakeE2B
) -> None:
    write_eval(
        tmp_path,
        "refused.eval.py",
        """
        from proctor import case, command, mock, suite, variant, profile

        sized = variant("command", name="sized", sandbox="e2b", template="proctor-base",
                        cpus=2, profile=profile("p", run="true"))
        plain = variant("command", name="plain", sandbox="e2b", template="proctor-base",
                        profile=profile("p", run="true"))
        untemplated = variant("command", name="untemplated", sandbox="e2b",
                              profile=profile("p", run="true"))
        s = suite("refused", prompt="go", variants=[sized, plain, untemplated],
                  mocks=[mock.api("billing", routes={"GET /health": {"ok": True}})],
                  cases=[case("c", validate=command("true"))])
        """,
    )
    result = sqlite_backend.eval(tmp_path, extra_env=fake_e2b.sdk_env())
    assert result.returncode != 0
    assert "the e2b sandbox cannot apply cpus= (E2B sets CPU and memory per template" in (
        result.stderr + result.stdout
    )
    assert "variant plain: the suite has mocks, which run on the worker" in (
        result.stderr + result.stdout
    )
    assert "variant untemplated: the e2b sandbox needs template='...'" in result.stderr
    assert "Traceback" not in result.stderr
    assert fake_e2b.created == []


SLEEPER_EVAL = f"""
from proctor import case, command, profile, suite, variant

remote = variant("command", name="remote", sandbox="e2b", template="proctor-base",
                 profile=profile("sleeper", dir={str(AGENTS)!r},
                                 run='CHILD_PID_FILE=$HOME/child GRANDCHILD_PID_FILE=$HOME/grandchild '
                                     'bash "$PROCTOR_PROFILE_DIR/sleeper.sh"'))
s = suite("sleepy", prompt="work", variants=[remote],
          cases=[case("sleeps", timeout_ms={{timeout_ms}}, validate=command("true"))])
"""


def test_a_step_past_its_time_is_timed_out_and_its_sandbox_killed(
    sqlite_backend: Backend, tmp_path, fake_e2b: FakeE2B
) -> None:
    write_eval(tmp_path, "sleepy.eval.py", SLEEPER_EVAL.format(timeout_ms=3000))
    result = sqlite_backend.eval(tmp_path, "--json", extra_env=fake_e2b.sdk_env())
    report = json.loads(result.stdout)
    (trial,) = only_run(report, "sleeps")["trials"]
    assert trial["status"] == "timed_out", trial
    (trial_id,) = sqlite_backend.trial_ids(report["batch"], "sleeps")
    # What the agent printed before its time was up was streamed and kept.
    assert "Message" in [kind for kind, _ in sqlite_backend.events(trial_id)]
    assert fake_e2b.running() == []


def test_the_reaper_kills_the_remote_sandbox_of_a_worker_that_died(
    sqlite_backend: Backend, tmp_path, fake_e2b: FakeE2B
) -> None:
    write_eval(tmp_path, "sleepy.eval.py", SLEEPER_EVAL.format(timeout_ms=600_000))
    # One attempt: the reaper ends the lost trial instead of running it again.
    env = {
        **sqlite_backend.env,
        **fake_e2b.sdk_env(),
        "PROCTOR_LEASE_S": "2",
        "PROCTOR_MAX_ATTEMPTS": "1",
    }
    worker = subprocess.Popen(
        [PROCTOR, "eval", "--json"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert eventually(lambda: fake_e2b.running() != []), "no sandbox was created"
        (sandbox_id,) = fake_e2b.running()
        assert eventually(
            lambda: (
                sqlite_backend.exists()
                and sqlite_backend.scalar(
                    "SELECT count(*) FROM evals_app_trial WHERE remote_sandboxes LIKE ?",
                    f"%{sandbox_id}%",
                )
            )
        ), "the sandbox was not recorded with its trial"
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    # The worker is gone; its sandbox runs on, paid for, until a reaper sees the lease lapse.
    assert fake_e2b.running() == [sandbox_id]
    reap = (
        "import time; from runner.jobs import reaper\n"
        "for _ in range(300):\n"
        "    requeued, ended = reaper.reap()\n"
        "    if requeued or ended: break\n"
        "    time.sleep(0.5)\n"
        "print(requeued, ended)"
    )
    result = subprocess.run(
        [PROCTOR, "shell", "-c", reap], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("[] [1]"), result.stdout
    assert fake_e2b.running() == []
    assert sandbox_id in fake_e2b.killed
