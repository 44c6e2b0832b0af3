"""A Python assertion function that hangs, through the real `proctor eval`: it ends failed in
the case's check limit (1 s here) with the sentence saying what hung, like a validator, and the
assertions after it are still graded."""

from __future__ import annotations

import json

from e2e.running import AGENTS, Backend, only_run, write_eval

HANGING_ASSERTION_EVAL = f"""
import time

from proctor import assertion, case, profile, suite, variant


def waits_forever(ctx):
    print("about to wait forever")
    time.sleep(3600)
    return True


echo = variant("command", profile=profile("echo", dir={str(AGENTS)!r},
                                          run='bash "$PROCTOR_PROFILE_DIR/echo_agent.sh"'))

s = suite("hanging-assertions", prompt="fix the total", variants=[echo], cases=[
    case("hanging-assertion", check_timeout_ms=1000, validate=[
        assertion("python", waits_forever),
        assertion("icontains", "fixed the total"),
    ]),
])
"""

# Far beyond the 1 s limit on a busy machine, far below the hour the assertion would hang.
CEILING_S = 600


def test_a_hanging_assertion_fails_in_its_time_limit(backend: Backend, tmp_path) -> None:
    write_eval(tmp_path, "hangs.eval.py", HANGING_ASSERTION_EVAL)
    result = backend.eval(tmp_path, "--json", "--fail-under", "0", timeout=CEILING_S)
    assert result.returncode == 0, result.stdout + result.stderr
    (trial,) = only_run(json.loads(result.stdout), "hanging-assertion")["trials"]
    assert trial["status"] == "failed"
    hung, graded = trial["checks"]
    assert hung["passed"] is False
    assert hung["message"] == "assertion waits_forever did not finish within 1 s"
    assert graded["passed"] is True, "the next assertion is still graded"
