"""Found while running simulated-user batches: when `proctor eval` starts several trials at once in
its local pool, the pool threads race Celery's lazy set-up of the trial task. A losing thread
fails with "'NoneType' object has no attribute 'push'" before its trial starts; the command
prints "N trial(s) did not finish", exits 0, and leaves those trials queued and the batch
running. The race itself is timing-dependent (seen in about one run in three of a seven-trial
batch on this machine), so this test checks the condition that prevents it: by the time the
pool may run a task, the task is set up in the thread that started the batch.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import proctor_env

# What `proctor eval` does before any pool thread runs a trial: size the pool, then enqueue.
PREPARE_LIKE_EVAL = """
import os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proctor.settings")
import django
django.setup()
from runner.jobs import dispatch
dispatch.configure_local_workers(4)
dispatch.enqueue([])
from runner.jobs.tasks import run_trial
print("ready" if run_trial.__evaluated__() else "lazy")
"""


def test_the_trial_task_is_set_up_before_pool_threads_may_run_it(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", PREPARE_LIKE_EVAL],
        env=proctor_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ready"
