"""The outside-write audit of the local sandbox, through the real `proctor eval`: it cannot
tell apart the writes of trials running at the same time (``-j 2`` runs them in two worker
processes), so two concurrent trials each say so in their record (naming the other worker)
and log line, while a trial running alone says nothing of the kind; and a secret prepare
returned, written into a path, is redacted there, in its own record and in the other trial's,
which may list that path too."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from e2e.running import Backend, trial_folder, write_eval

NOTE = "may include writes of 1 other trial running at the same time"


def _eval(stamp: str, trials: int) -> str:
    # Each agent reads the key prepare left, writes /opt/proctor-attribution-<stamp>-<key>-<pid>,
    # and stays a second so concurrent trials overlap.
    run = (
        f'echo x > "/opt/proctor-attribution-{stamp}-$(cat .prepared-secret)-$$.txt"; '
        "sleep 1; "
        """echo '{"_tag":"Message","role":"assistant","text":"done"}'; """
        """echo '{"_tag":"Finished","reason":"done"}'"""
    )
    return f"""
    import secrets

    from proctor import case, command, profile, suite, variant


    def make_key(ctx):
        key = "tk_" + secrets.token_hex(16)
        ctx.write_text(".prepared-secret", key)
        return {{"api_key": key}}


    s = suite("attribution", prompt="write outside", trials={trials},
              cases=[case("writer", prepare=make_key, validate=command("true"))],
              variants=[variant("command", sandbox="local",
                                profile=profile("writer", run={run!r}))])
    """


def _records(backend: Backend, batch: int) -> list[tuple[object, list[str], list[str]]]:
    """Each trial's (outside-writes.json, stored outside_writes, its audit log lines)."""
    records = []
    for trial_id in backend.trial_ids(batch):
        written = json.loads(
            (trial_folder(backend, batch, trial_id) / "outside-writes.json").read_text()
        )
        stored = backend.json_value(
            backend.scalar("SELECT outside_writes FROM evals_app_trial WHERE id = ?", trial_id)
        )
        logged = [
            data["text"]
            for kind, data in backend.events(trial_id)
            if kind == "Log" and "outside its workspace" in data["text"]
        ]
        records.append((written, stored, logged))
    return records


def test_concurrent_trials_say_their_writes_may_be_each_others(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    stamp = secrets.token_hex(4)
    try:
        write_eval(tmp_path / "two", "attribution.eval.py", _eval(stamp, trials=2))
        two = sqlite_backend.eval_json(tmp_path / "two", "-j", "2")
        write_eval(tmp_path / "one", "attribution.eval.py", _eval(stamp, trials=1))
        one = sqlite_backend.eval_json(tmp_path / "one", "-j", "1")
        left = sorted(str(p) for p in Path("/opt").glob(f"proctor-attribution-{stamp}-*"))
    finally:
        for path in Path("/opt").glob(f"proctor-attribution-{stamp}-*"):
            path.unlink()
    assert len(left) == 3, left

    concurrent = _records(sqlite_backend, two["batch"])
    assert len(concurrent) == 2
    for written, stored, logged in concurrent:
        assert isinstance(written, dict), written
        assert written["note"] == NOTE and written["concurrent_trials"] == 1
        # The other trial ran in the sibling worker process, named by its pid.
        assert list(written["in_other_processes"].values()) == [1], written
        assert written["paths"], "its own write at least"
        (line,) = logged
        assert line.endswith(f"({NOTE})"), line
        for text in (json.dumps(written), json.dumps(stored), line):
            assert "tk_" not in text, "the prepared key in a path is redacted"
        assert any("[redacted]" in path for path in written["paths"]), written

    ((written, stored, logged),) = _records(sqlite_backend, one["batch"])
    assert isinstance(written, list), "a trial running alone keeps the plain list"
    (line,) = logged
    assert "at the same time" not in line
    own = [path for path in written if f"proctor-attribution-{stamp}-" in path]
    assert own == [f"/opt/proctor-attribution-{stamp}-[redacted]-{own[0].rsplit('-', 1)[1]}"]
    assert "tk_" not in json.dumps(written) + json.dumps(stored) + line
