"""The outside-write audit counts the trials of every Proctor process on the machine, not only
its own and its sibling workers': two unrelated `proctor eval`s (each its own home and
database, -j 1) whose agents run at the same time each say their writes may be the other's."""

from __future__ import annotations

import json
import secrets
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conftest import proctor_env

from e2e.running import Backend, trial_folder, write_eval

NOTE = "may include writes of 1 other trial running at the same time"


def _eval(stamp: str, meeting: Path) -> str:
    # Each agent says it started, waits (for two minutes at most) until the other one has,
    # so both surely run at once, then writes outside its workspace and finishes.
    run = (
        f'touch "{meeting}/$$"; n=0; '
        f'while [ "$(ls "{meeting}" | wc -l)" -lt 2 ] && [ $n -lt 1200 ]; '
        "do sleep 0.1; n=$((n+1)); done; "
        f'echo x > "/opt/proctor-machine-{stamp}-$$.txt"; '
        """echo '{"_tag":"Finished","reason":"done"}'"""
    )
    return f"""
    from proctor import case, command, profile, suite, variant

    s = suite("machine", prompt="write outside",
              cases=[case("writer", validate=command("true"))],
              variants=[variant("command", sandbox="local",
                                profile=profile("writer", run={run!r}))])
    """


def test_trials_of_two_unrelated_evals_each_count_the_other(tmp_path: Path) -> None:
    stamp = secrets.token_hex(4)
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    backends = [Backend("sqlite", proctor_env(tmp_path / f"home-{name}")) for name in "ab"]
    for name in "ab":
        write_eval(tmp_path / name, "machine.eval.py", _eval(stamp, meeting))
    try:
        with ThreadPoolExecutor(2) as pool:
            reports = list(
                pool.map(
                    lambda pair: pair[0].eval_json(tmp_path / pair[1], "-j", "1"),
                    zip(backends, "ab", strict=True),
                )
            )
    finally:
        for path in Path("/opt").glob(f"proctor-machine-{stamp}-*"):
            path.unlink()
    assert len(list(meeting.iterdir())) == 2, "both agents started"
    for backend, report in zip(backends, reports, strict=True):
        (trial_id,) = backend.trial_ids(report["batch"])
        written = json.loads(
            (trial_folder(backend, report["batch"], trial_id) / "outside-writes.json").read_text()
        )
        assert isinstance(written, dict), written
        assert written["concurrent_trials"] == 1 and written["note"] == NOTE, written
