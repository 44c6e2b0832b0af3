"""Found while running simulated-user batches: when `proctor eval` started several trials at once
in its local pool, the pool threads raced Celery's lazy set-up of the trial task. A losing thread
failed with "'NoneType' object has no attribute 'push'" before its trial started; the command
printed "N trial(s) did not finish", exited 0, and left those trials queued and the batch
running (about one run in three of a seven-trial batch on this machine). The local pool now
calls the task's own function, with no Celery in between, so there is no set-up left to race:
a batch whose trials all start together runs every one of them.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import proctor_env, run_proctor

TRIALS = 7

EVAL = f"""
from proctor import case, command, profile, suite, variant

together = suite(
    "together",
    prompt="start",
    cases=[case(f"c{{n}}", validate=command("test -f started")) for n in range({TRIALS})],
    variants=[
        variant(
            "command",
            name="quick",
            profile=profile(
                "quick",
                run="touch started; "
                "echo '{{\\"_tag\\":\\"Started\\",\\"sessionId\\":\\"s\\",\\"model\\":\\"none\\"}}'; "
                "echo '{{\\"_tag\\":\\"Finished\\",\\"reason\\":\\"done\\"}}'",
            ),
        )
    ],
)
"""


def test_trials_that_start_together_in_the_local_pool_all_run(tmp_path: Path) -> None:
    (tmp_path / "together.eval.py").write_text(EVAL)

    result = run_proctor(
        "eval",
        str(tmp_path / "together.eval.py"),
        "-j",
        str(TRIALS),
        "--json",
        cwd=tmp_path,
        env=proctor_env(tmp_path / "home"),
    )

    assert result.returncode == 0, result.stderr
    assert "did not finish" not in result.stderr
    report = json.loads(result.stdout)
    statuses = [trial["status"] for run in report["runs"] for trial in run["trials"]]
    assert statuses == ["passed"] * TRIALS
