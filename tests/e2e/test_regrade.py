"""`proctor regrade BATCH`: after a too-strict validator is fixed, the batch's stored trials are
graded again with the current checks, as a new batch linked to the original, and no agent runs.

Every agent here appends a line to a file outside its workspace each time it runs: that file
not growing is the proof that a re-grade started no agent process."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import PROCTOR

from e2e.running import Backend, run_hang_aware, write_eval
from e2e.test_celery_worker import scaled_backend, worker_log  # noqa: F401 (fixtures)

# Writes "four" and counts its own runs.
WRITER = """#!/usr/bin/env bash
echo run >> {runs}
echo '{{"_tag":"Started","sessionId":"s1","model":"m"}}'
echo four > answer.txt
echo '{{"_tag":"Message","role":"assistant","text":"Wrote four."}}'
echo '{{"_tag":"Finished","reason":"done"}}'
"""

EVAL = """
from proctor import case, profile, suite, variant

LIMIT = {limit}


def short_answer(ctx):
    return len(ctx.read_text("answer.txt").strip()) <= LIMIT


def says_four(ctx):
    return ctx.read_text("answer.txt").strip() == "four"


words = suite(
    "words",
    prompt="Write a short word",
    trials=2,
    cases=[case("short", validate=short_answer), case("four", validate=says_four)],
    variants=[variant("command", name="writer",
        profile=profile("writer", dir={agent!r}, run='bash "$PROCTOR_PROFILE_DIR/writer.sh"'))],
)
"""


def regrade(backend: Backend, cwd: Path, *args: str, **env: str):
    return run_hang_aware(
        [PROCTOR, "regrade", *args], cwd=cwd, env={**backend.env, **env}, timeout=300
    )


def make_project(tmp_path: Path, *, limit: int) -> tuple[Path, Path, Path]:
    agent = tmp_path / "agent"
    agent.mkdir()
    runs = tmp_path / "agent-runs.txt"
    (agent / "writer.sh").write_text(WRITER.format(runs=runs))
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("")
    eval_file = write_eval(project, "words.eval.py", EVAL.format(limit=limit, agent=str(agent)))
    return project, eval_file, runs


def statuses(backend: Backend, batch: int) -> dict[tuple[str, int], str]:
    rows = backend.rows(
        'SELECT c.slug, t."index", t.status FROM evals_app_trial t '
        "JOIN evals_app_run r ON t.run_id = r.id "
        "JOIN evals_app_caseversion v ON r.case_version_id = v.id "
        "JOIN evals_app_case c ON v.case_id = c.id WHERE r.batch_id = ?",
        batch,
    )
    return {(case, index): status for case, index, status in rows}


def test_a_fixed_validator_flips_the_right_trials_and_no_agent_runs(backend, tmp_path) -> None:
    project, eval_file, runs = make_project(tmp_path, limit=3)
    first = backend.eval(project, "-j", "2")
    assert first.returncode == 0, first.stderr
    assert statuses(backend, 1) == {
        ("short", 0): "failed",
        ("short", 1): "failed",
        ("four", 0): "passed",
        ("four", 1): "passed",
    }
    assert len(runs.read_text().splitlines()) == 4

    eval_file.write_text(eval_file.read_text().replace("LIMIT = 3", "LIMIT = 10"))
    result = regrade(backend, project, "1")

    assert result.returncode == 0, result.stderr
    assert "Batch 2: re-graded from batch 1 with checks of four v1, short v2" in result.stderr
    assert "short × writer trial #1: failed → passed" in result.stdout
    assert "short × writer trial #2: failed → passed" in result.stdout
    assert "four × writer trial #1: passed (unchanged)" in result.stdout
    assert "2 of 4 trials changed" in result.stdout
    # No agent ran: its count of runs did not move.
    assert len(runs.read_text().splitlines()) == 4
    assert set(statuses(backend, 2).values()) == {"passed"}
    # The original is left as it was; the re-grade names it, and is not one of its reruns.
    assert set(statuses(backend, 1).values()) == {"failed", "passed"}
    parent, options = backend.rows("SELECT parent_id, options FROM evals_app_batch WHERE id = 2")[0]
    assert parent is None
    assert backend.json_value(options)["regrade_of"] == 1
    # Its own case versions: short is v2 now, four kept v1.
    versions = backend.rows(
        "SELECT c.slug, v.number FROM evals_app_run r "
        "JOIN evals_app_caseversion v ON r.case_version_id = v.id "
        "JOIN evals_app_case c ON v.case_id = c.id WHERE r.batch_id = 2 ORDER BY c.slug"
    )
    assert versions == [("four", 1), ("short", 2)]
    # The transcript came along: the re-graded trial's page shows what the agent said.
    (regraded, *_) = backend.trial_ids(2, "short")
    assert ("Message", {"role": "assistant", "text": "Wrote four."}) in [
        (kind, {k: data[k] for k in ("role", "text")} if kind == "Message" else data)
        for kind, data in backend.events(regraded)
    ]


def test_a_workspace_over_the_cap_is_not_kept_and_the_re_grade_says_so(
    sqlite_backend, tmp_path
) -> None:
    project, _eval_file, runs = make_project(tmp_path, limit=10)
    first = sqlite_backend.eval(project, extra_env={"PROCTOR_WORKSPACE_KEEP_MB": "0"})
    assert first.returncode == 0, first.stderr
    trial_id = sqlite_backend.trial_ids(1, "short")[0]
    conversation = json.loads(
        (sqlite_backend.artifacts / f"batches/1/trials/{trial_id}/conversation.json").read_text()
    )
    assert conversation["workspace"]["not_kept"] == "over 0.0 MB (0.0 MB of files)"

    result = regrade(sqlite_backend, project, "1")

    assert result.returncode == 0, result.stderr
    assert (
        "short × writer trial #1: passed → errored — workspace not kept: over 0.0 MB "
        "(0.0 MB of files)"
    ) in result.stdout
    assert len(runs.read_text().splitlines()) == 4


def test_an_eval_file_that_moved_is_named_and_can_be_given(sqlite_backend, tmp_path) -> None:
    project, eval_file, _runs = make_project(tmp_path, limit=10)
    assert sqlite_backend.eval(project).returncode == 0
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    (moved / "pyproject.toml").write_text("")
    target = moved / "words.eval.py"
    eval_file.rename(target)

    refused = regrade(sqlite_backend, project, "1")
    assert refused.returncode == 2
    assert "words.eval.py: batch 1's eval file is not there" in refused.stderr
    assert "proctor regrade 1 PATH" in refused.stderr

    given = regrade(sqlite_backend, project, "1", str(target))
    assert given.returncode == 0, given.stderr
    assert "0 of 4 trials changed" in given.stdout


# Refunds order 42 through the billing mock on every turn, and says which turn it is on.
CALLER = """
import json, os, urllib.request
with open({runs!r}, "a") as runs:
    runs.write("run\\n")
opener = urllib.request.build_opener(urllib.request.ProxyHandler({{}}))
request = urllib.request.Request(os.environ["BILLING_URL"] + "/refunds", method="POST",
    data=json.dumps({{"order_id": 42}}).encode(), headers={{"Content-Type": "application/json"}})
opener.open(request, timeout=10).read()
turn = "second" if os.environ.get("PROCTOR_SESSION_ID") else "first"
print(json.dumps({{"_tag": "Started", "sessionId": "s1", "model": "m"}}))
print(json.dumps({{"_tag": "Message", "role": "assistant", "text": f"Refunded on the {{turn}} turn."}}))
print(json.dumps({{"_tag": "Finished", "reason": "done"}}))
"""

CONVERSATION_EVAL = """
from proctor import case, mock, profile, suite, turns, variant

TURNS = {turns}
REFUNDS = {refunds}


def answered_each_turn(ctx):
    answers = [turn.answer for turn in ctx.turns()]
    return {{"passed": len(answers) == TURNS, "message": " | ".join(answers)}}


def refunded_once_a_turn(ctx):
    count = ctx.mocks["billing"].count("POST", "/refunds", json={{"order_id": 42}})
    return {{"passed": count == REFUNDS, "message": f"{{count}} refunds"}}


refunds = suite(
    "refunds",
    prompt="Refund order 42.",
    mocks=[mock.api("billing", routes={{"POST /refunds": mock.response(201, json={{"id": "re_1"}})}})],
    cases=[case("refund", user=turns("Once more, please."),
                validate=[answered_each_turn, refunded_once_a_turn])],
    variants=[variant("command", name="caller", profile=profile("caller", dir={agent!r},
        run='python3 "$PROCTOR_PROFILE_DIR/caller.py"', capabilities=["conversation-resume"]))],
)
"""


def test_a_conversation_and_a_mock_call_log_are_graded_again_from_the_record(
    sqlite_backend, tmp_path
) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    runs = tmp_path / "agent-runs.txt"
    (agent / "caller.py").write_text(CALLER.format(runs=str(runs)))
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("")
    eval_file = write_eval(
        project, "refunds.eval.py", CONVERSATION_EVAL.format(turns=3, refunds=1, agent=str(agent))
    )
    first = sqlite_backend.eval(project)
    assert first.returncode == 0, first.stderr
    (original,) = sqlite_backend.trial_ids(1)
    assert sqlite_backend.scalar("SELECT status FROM evals_app_trial WHERE id = ?", original) == (
        "failed"
    )
    assert len(runs.read_text().splitlines()) == 2  # two turns, two runs of the agent

    # Both validators were wrong: two turns were held, and the mock was called once in each.
    eval_file.write_text(
        CONVERSATION_EVAL.format(turns=2, refunds=2, agent=str(agent)), encoding="utf-8"
    )
    result = regrade(sqlite_backend, project, "1")

    assert result.returncode == 0, result.stderr
    assert "refund × caller trial #1: failed → passed" in result.stdout
    assert len(runs.read_text().splitlines()) == 2
    (regraded,) = sqlite_backend.trial_ids(2)
    checks = dict(
        sqlite_backend.rows(
            'SELECT name, message FROM evals_app_check WHERE trial_id = ? ORDER BY "index"',
            regraded,
        )
    )
    assert checks == {
        "answered_each_turn": "Refunded on the first turn. | Refunded on the second turn.",
        "refunded_once_a_turn": "2 refunds",
    }
    # The new trial holds the conversation's turns and the calls its checks read.
    assert sqlite_backend.rows(
        'SELECT prompt FROM evals_app_turn WHERE trial_id = ? ORDER BY "index"', regraded
    ) == [("Refund order 42.",), ("Once more, please.",)]
    assert (
        sqlite_backend.scalar(
            "SELECT COUNT(*) FROM evals_app_mockcall WHERE trial_id = ?", regraded
        )
        == 2
    )


def test_a_re_grade_runs_on_the_workers_of_the_scaled_mode(
    scaled_backend: Backend,  # noqa: F811 (the fixture imported above)
    worker_log: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    project, eval_file, runs = make_project(tmp_path, limit=3)
    first = scaled_backend.eval(project, timeout=120)
    assert first.returncode == 0, first.stderr
    eval_file.write_text(eval_file.read_text().replace("LIMIT = 3", "LIMIT = 10"))

    result = regrade(scaled_backend, project, "1")

    assert result.returncode == 0, result.stderr
    assert "2 of 4 trials changed" in result.stdout
    assert len(runs.read_text().splitlines()) == 4
    # The worker ran the re-grade's trials from the bundle of the current eval file.
    log = worker_log.read_text()
    assert len(re.findall(r"Task proctor\.run_trial\[[0-9a-f-]+\] succeeded", log)) == 8, log
    assert set(statuses(scaled_backend, 2).values()) == {"passed"}
