"""A `proctor worker` stopped with SIGTERM (a warm shutdown) while trials are queued: it
finishes the trials it runs, hands the rest back (they stay ``queued``, never ``errored``),
exits within seconds of its running trials ending, and another worker runs the rest."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from ceilings import HANG_CEILING_S

from faults.conftest import Workers, agent_runs, lease_eval, submit, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

CASES = 6
WORK_S = 4


def test_a_stopped_worker_leaves_queued_trials_queued_and_exits_promptly(
    scaled, workers: Workers, tmp_path: Path
):
    project, runs_dir = tmp_path / "project", tmp_path / "runs"
    lease_eval(project, runs_dir, cases=CASES, work_s=WORK_S)
    worker, log = workers.start("stopped")
    batch = submit(scaled, project)

    def statuses() -> dict[int, str]:
        return dict(
            scaled.rows(
                "SELECT t.id, t.status FROM evals_app_trial t "
                "JOIN evals_app_run r ON t.run_id = r.id WHERE r.batch_id = ?",
                batch,
            )
        )

    wait_for(
        lambda: list(statuses().values()).count("running") == 2,
        timeout=30,
        what="two running trials",
    )
    worker.send_signal(signal.SIGTERM)
    # It exits once its running trials end, leaving the queued ones; the ceiling only guards
    # against hanging.
    worker.wait(timeout=HANG_CEILING_S)

    ended = [run.ended for runs in agent_runs(runs_dir).values() for run in runs if run.ended]
    assert len(ended) == 2, log.read_text()[-3000:]
    after = statuses()
    assert sorted(after.values()) == ["passed"] * 2 + ["queued"] * (CASES - 2), log.read_text()
    assert "Traceback" not in log.read_text()

    # The queued trials went back to the broker: another worker runs them.
    workers.start("next")
    wait_for(
        lambda: (
            scaled.scalar("SELECT status FROM evals_app_batch WHERE id = ?", batch) == "finished"
        ),
        timeout=45,
        what="the next worker to finish the batch",
    )
    assert sorted(statuses().values()) == ["passed"] * CASES
    assert all(len(runs) == 1 for runs in agent_runs(runs_dir).values())
