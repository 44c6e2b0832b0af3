"""Failures grouped by cause (issue 32): a batch with three planted causes reads as three
lines in `proctor eval`'s summary, its --json, the API and the batch page, largest first, each
linking to its trials, although every trial's message names its own path, id and number."""

from __future__ import annotations

from pathlib import Path

from e2e.running import Backend, write_eval

PLANTED = """
import uuid

from proctor import case, command, profile, suite, variant


def health_route(ctx):
    # What differs from trial to trial: the workspace's path, an id, a number.
    assert False, (
        f"expected 200, got 500 from {ctx.workspace}/app/routes.py "
        f"(request {uuid.uuid4()}, {len(str(uuid.uuid4())) * 3} ms)"
    )


def broken_prepare(prep):
    raise RuntimeError(f"cannot reach the fixture server at /tmp/{uuid.uuid4().hex[:12]}/sock")


s = suite(
    "planted",
    prompt="work",
    trials=3,
    cases=[
        case("health-route", validate=[health_route]),
        case("health-route-again", validate=[health_route]),
        case("lint", validate=command("exit $((RANDOM % 3 + 1))")),
        case("fixture", prepare=broken_prepare, validate=command("true")),
        case("fine", validate=command("true")),
    ],
    variants=[variant("command", profile=profile("noop",
        run="echo '{\\"_tag\\":\\"Finished\\",\\"reason\\":\\"done\\"}'"))],
)
"""


def test_a_batch_with_three_planted_causes_is_summed_up_in_three_lines(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    write_eval(project, "planted.eval.py", PLANTED)

    shown = sqlite_backend.eval(project, "-j", "2")

    assert shown.returncode == 0, shown.stderr
    summary = shown.stdout[shown.stdout.index("Failures by cause") :].splitlines()
    # Six trials of two cases fail one validator, with their own paths, ids and numbers.
    assert summary[1].strip().startswith("6 failed: ")
    assert "expected 200, got 500 from " in summary[1]
    assert summary[1].rstrip().endswith("in check health_route")
    # Three trials fail a command with their own exit status; on a tie, failed before errored.
    assert summary[2].strip().startswith("3 failed: exited ")
    assert summary[2].rstrip().endswith("in check exit $((RANDOM % 3 + 1))")
    assert summary[3].strip().startswith("3 errored: ")
    assert "cannot reach the fixture server" in summary[3]
    # Three causes, three lines: the passing case is in none of them.
    assert not summary[4].startswith("  ")

    report = sqlite_backend.eval_json(project, "--case", "health-route", "--case", "fixture")
    groups = report["failure_groups"]
    assert [(g["status"], g["count"], g["check"]) for g in groups] == [
        ("failed", 3, "health_route"),
        ("errored", 3, None),
    ]
    trials = {t["id"]: t for run in report["runs"] for t in run["trials"]}
    assert {trials[t]["status"] for t in groups[0]["trial_ids"]} == {"failed"}
    assert {trials[t]["status"] for t in groups[1]["trial_ids"]} == {"errored"}
    assert all(
        url.endswith(f"/trials/{t}/")
        for url, t in zip(groups[0]["urls"], groups[0]["trial_ids"], strict=True)
    )
