"""Events are stored as they happen: an agent that prints one message and then works quietly
for 5 s has that message in the database within a second, while its trial is still running
(never held until the next line arrives)."""

from __future__ import annotations

import subprocess
import time

from conftest import PROCTOR

from e2e.running import AGENTS, Backend, write_eval

# The recorder's flusher wakes every 0.25 s; a second leaves room for a slow machine.
WITHIN_S = 1.0


def test_a_lone_message_is_stored_within_a_second_while_the_agent_works(
    backend: Backend, tmp_path
) -> None:
    printed_at = tmp_path / "printed-at"
    write_eval(
        tmp_path,
        "quiet.eval.py",
        f"""
    from proctor import case, command, profile, suite, variant

    s = suite("quiet", prompt="fix it",
              cases=[case("one-message", validate=command("true"))],
              variants=[variant("command", profile=profile(
                  "quiet", dir={str(AGENTS)!r}, run='bash "$PROCTOR_PROFILE_DIR/one_message_then_work.sh"',
                  env={{"PRINTED_AT_FILE": {str(printed_at)!r}}}))])
    """,
    )
    proc = subprocess.Popen(
        [PROCTOR, "eval", "--json"],
        cwd=tmp_path,
        env=backend.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: tuple[float, str] | None = None
    try:
        deadline = time.monotonic() + 60
        while seen is None and proc.poll() is None and time.monotonic() < deadline:
            try:
                rows = backend.rows(
                    "SELECT t.status FROM evals_app_event e JOIN evals_app_trial t "
                    "ON e.trial_id = t.id WHERE e.kind = 'Message'"
                )
            except Exception:  # the database or its tables do not exist yet
                rows = []
            if rows:
                seen = (time.time(), rows[0][0])
            time.sleep(0.05)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()

    assert proc.returncode == 0, stdout + stderr
    assert seen is not None, "the message was never seen while `proctor eval` ran"
    seen_at, status = seen
    assert status == "running", "seen while the agent still works, not at its end"
    delay = seen_at - float(printed_at.read_text())
    assert delay < WITHIN_S, f"the message reached the database {delay:.2f} s after it was printed"
