"""Time limits, prepare, its cache and its secrets, through the real `proctor eval`.

An agent that outlives timeout_ms ends timed out with every process it started gone; what
prepare returns reaches the validators and nothing else; a prepared cache folder is restored.
"""

from __future__ import annotations

import json
from pathlib import Path

from e2e.running import AGENTS, Backend, only_run, trial_folder, write_eval


def process_alive(pid: int) -> bool:
    """Whether ``pid`` is still a running ``sleep 300`` (a zombie waiting to be reaped is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state != "Z" and cmdline == b"sleep\x00300\x00"


def test_an_agent_that_outlives_its_time_limit_ends_timed_out_with_its_children_gone(
    backend: Backend, tmp_path
):
    child, grandchild = tmp_path / "child.pid", tmp_path / "grandchild.pid"
    write_eval(
        tmp_path,
        "limits.eval.py",
        f"""
    from proctor import case, command, profile, suite, variant

    s = suite("limits", prompt="work for a minute",
              cases=[case("too-slow", timeout_ms=1500, validate=command("true"))],
              variants=[variant("command", profile=profile(
                  "sleeper", dir={str(AGENTS)!r}, run='bash "$PROCTOR_PROFILE_DIR/sleeper.sh"',
                  env={{"CHILD_PID_FILE": {str(child)!r}, "GRANDCHILD_PID_FILE": {str(grandchild)!r}}}))])
    """,
    )

    report = backend.eval_json(tmp_path, "--fail-under", "0")

    (trial,) = only_run(report, "too-slow")["trials"]
    assert trial["status"] == "timed_out"
    assert trial["finish_reason"] == "timed out"
    assert trial["checks"] == [], "a timed-out trial is never graded as a pass or a fail"
    assert trial["answer"] == "still working", "what the agent said before the limit is kept"
    assert trial["duration_ms"] >= 1500
    pids = [int(child.read_text()), int(grandchild.read_text())]
    assert [pid for pid in pids if process_alive(pid)] == []
    (trial_id,) = backend.trial_ids(report["batch"])
    assert backend.scalar("SELECT COUNT(*) FROM evals_app_check WHERE trial_id = ?", trial_id) == 0
    assert (
        backend.scalar("SELECT status FROM evals_app_trial WHERE id = ?", trial_id) == "timed_out"
    )
    benchmark = json.loads(
        (backend.artifacts / "batches" / str(report["batch"]) / "benchmark.json").read_text()
    )
    assert benchmark["validity_warnings"] == {"command:sleeper": {"timed_out": 1}}
    assert benchmark["variants"]["command:sleeper"]["pass_rate"] == 0


SECRET_EVAL = f"""
import os
import secrets

from proctor import Verdict, case, profile, suite, variant


def make_key(ctx):
    key = "tk_" + secrets.token_hex(16)
    # Printed, never returned: redacted only because it looks like a key.
    provider_key = "sk-live-" + secrets.token_hex(12)
    with open(os.environ["SECRET_DROP"], "a") as drop:
        drop.write(f"{{key}} {{provider_key}}\\n")
    ctx.write_text(".prepared-secret", key)
    print(f"created test key {{key}}")
    print(f"export API_KEY={{provider_key}}")
    ctx.exec(f"echo prepare command saw {{key}}")
    return {{"api_key": key, "port": 4173}}


def validator_sees_the_key(ctx):
    key = ctx.prepared["api_key"]
    print(f"validator printing {{key}}")
    seen = key in ctx.answer() and ctx.read_text(".prepared-secret") == key and ctx.prepared["port"] == 4173
    return Verdict(seen, f"validator saw {{key}}")


def validator_raising_the_key(ctx):
    raise AssertionError(f"did not expect {{ctx.prepared['api_key']}}")


s = suite("secrets", prompt="use the key",
          cases=[case("prepared-key", prepare=make_key, validate=[validator_sees_the_key, validator_raising_the_key])],
          variants=[variant("command", profile=profile("secret", dir={str(AGENTS)!r},
                                                        run='bash "$PROCTOR_PROFILE_DIR/secret_agent.sh"'))])
"""


def test_a_secret_returned_by_prepare_reaches_the_validator_and_nothing_else(
    backend: Backend, tmp_path
):
    drop = tmp_path / "secrets.txt"
    project = tmp_path / "project"
    write_eval(project, "secrets.eval.py", SECRET_EVAL)
    env = {"SECRET_DROP": str(drop)}

    as_json = backend.eval(project, "--json", extra_env=env)
    as_table = backend.eval(project, extra_env=env)

    assert (as_json.returncode, as_table.returncode) == (0, 0), as_json.stderr + as_table.stderr
    leaks = drop.read_text().split()
    assert len(leaks) == 4, "two runs, each with a returned key and a printed provider key"
    report = json.loads(as_json.stdout)
    (trial,) = only_run(report, "prepared-key")["trials"]
    assert trial["checks"][0] == {
        "name": "validator_sees_the_key",
        "kind": "validator",
        "passed": True,
        "message": "validator saw [redacted]",
    }
    assert trial["checks"][1]["message"] == "AssertionError: did not expect [redacted]"
    assert trial["answer"] == "the key is [redacted]"
    assert trial["finish_reason"] == "done with [redacted]"
    (trial_id,) = backend.trial_ids(report["batch"])
    logged = [data["text"] for kind, data in backend.events(trial_id) if kind == "Log"]
    assert "created test key [redacted]" in logged
    assert "export API_KEY=[redacted]" in logged, "prepare's key-shaped output is redacted too"
    assert "prepare command saw [redacted]" in logged

    stored = backend.all_text()
    outputs = as_json.stdout + as_json.stderr + as_table.stdout + as_table.stderr
    files = {path: path.read_bytes() for path in backend.home.rglob("*") if path.is_file()}
    assert trial_folder(backend, report["batch"], trial_id) / "output.log" in files
    for leak in leaks:
        assert leak not in stored
        assert leak not in outputs
        assert [path for path, content in files.items() if leak.encode() in content] == []
    assert (
        "[redacted]"
        in (trial_folder(backend, report["batch"], trial_id) / "workspace.diff").read_text()
    )


CACHE_EVAL = f"""
from proctor import Verdict, case, command, profile, suite, variant


def build_deps(ctx):
    if not ctx.cached:
        ctx.exec("mkdir -p deps && echo built-once > deps/marker.txt")
    return {{"cached": ctx.cached}}


def reports_the_cache(ctx):
    return Verdict(True, f"cached={{ctx.prepared['cached']}} marker={{ctx.read_text('deps/marker.txt').strip()}}")


s = suite("caching", prompt="go", trials=2,
          cases=[case("cached-deps", prepare=build_deps, cache={{"key": "deps-v1", "path": "deps"}},
                      validate=reports_the_cache)],
          variants=[variant("command", profile=profile("echo", dir={str(AGENTS)!r},
                                                        run='bash "$PROCTOR_PROFILE_DIR/echo_agent.sh"'))])
"""


def test_prepare_sees_its_cache_restored_from_the_second_trial_on(backend: Backend, tmp_path):
    write_eval(tmp_path, "caching.eval.py", CACHE_EVAL)

    first = backend.eval_json(tmp_path, "-j", "1")
    later = backend.eval_json(tmp_path, "-j", "1", "--trials", "1")

    messages = [t["checks"][0]["message"] for t in only_run(first, "cached-deps")["trials"]]
    assert messages == ["cached=False marker=built-once", "cached=True marker=built-once"]
    (again,) = only_run(later, "cached-deps")["trials"]
    assert again["checks"][0]["message"] == "cached=True marker=built-once"
    (trial_id,) = backend.trial_ids(later["batch"])
    diff = (trial_folder(backend, later["batch"], trial_id) / "workspace.diff").read_text()
    assert "total.ts" in diff and "marker.txt" not in diff
