"""A `proctor worker` killed with SIGKILL mid-batch (PostgreSQL + Redis, two workers): its
trials' leases lapse, the other worker's reaper re-queues them and runs them as attempt 2, the
batch finishes, and no trial runs twice at once."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from faults.conftest import (
    Workers,
    agent_runs,
    kill_agents,
    lease_eval,
    submit,
    trial_page,
    wait_for,
)

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

CASES = 8
WORK_S = 5


def test_a_killed_workers_trials_are_rerun_by_the_other_worker(
    scaled, workers: Workers, tmp_path: Path
):
    project, runs_dir = tmp_path / "project", tmp_path / "runs"
    lease_eval(project, runs_dir, cases=CASES, work_s=WORK_S)
    doomed, _ = workers.start("doomed")
    survivor, survivor_log = workers.start("survivor")
    batch = submit(scaled, project)

    def doomed_trials() -> list[int]:
        return [
            trial_id
            for (trial_id,) in scaled.rows(
                "SELECT id FROM evals_app_trial WHERE status = 'running' AND lease_owner LIKE ?",
                f"%:{doomed.pid}:%",
            )
        ]

    def doomed_agents_running() -> list[int] | None:
        """The doomed worker's two trials, once both of their agents have started: killed
        earlier, between its claim and its agent's start, a trial has no first run to count."""
        lost = doomed_trials()
        if len(lost) != 2:
            return None
        cases = [
            slug
            for (slug,) in scaled.rows(
                "SELECT c.slug FROM evals_app_trial t JOIN evals_app_run r ON t.run_id = r.id "
                "JOIN evals_app_caseversion v ON r.case_version_id = v.id "
                "JOIN evals_app_case c ON v.case_id = c.id WHERE t.id IN (?, ?)",
                *lost,
            )
        ]
        runs = agent_runs(runs_dir)
        started = all(any(run.ended is None for run in runs.get(case, [])) for case in cases)
        return lost if len(cases) == 2 and started else None

    lost = wait_for(
        doomed_agents_running, timeout=30, what="two agents running on the doomed worker"
    )
    os.killpg(doomed.pid, signal.SIGKILL)
    killed_at = time.time()
    doomed.wait()
    try:
        wait_for(
            lambda: (
                scaled.scalar("SELECT status FROM evals_app_batch WHERE id = ?", batch)
                == "finished"
            ),
            timeout=60,
            what=f"the batch to finish (survivor's log:\n{survivor_log.read_text()[-3000:]})",
        )
    finally:
        kill_agents(runs_dir)

    trials = {
        trial_id: (status, attempt, reason)
        for trial_id, status, attempt, reason in scaled.rows(
            "SELECT t.id, t.status, t.attempt, t.finish_reason FROM evals_app_trial t "
            "JOIN evals_app_run r ON t.run_id = r.id WHERE r.batch_id = ?",
            batch,
        )
    }
    assert len(trials) == CASES
    assert not [t for t, (status, _, _) in trials.items() if status in ("queued", "running")]
    for trial_id, (status, attempt, _) in trials.items():
        # The lost trials were run again by the survivor (attempts were left); the others once.
        assert (status, attempt) == ("passed", 2 if trial_id in lost else 1), trial_id

    # No trial ran twice at once: a second run starts only after the first one's worker died,
    # and every trial ended exactly once.
    runs = agent_runs(runs_dir)
    assert len(runs) == CASES
    for case, case_runs in runs.items():
        assert 1 <= len(case_runs) <= 2, (case, case_runs)
        assert len([run for run in case_runs if run.ended is not None]) == 1, (case, case_runs)
        if len(case_runs) == 2:
            first, second = case_runs
            assert first.ended is None and second.started > killed_at, (case, case_runs)
    assert sum(len(case_runs) == 2 for case_runs in runs.values()) == len(lost)

    # The survivor's heartbeat kept its own trials: none of them was ever run twice.
    assert survivor.poll() is None
    assert "worker lost, retried (attempt 2)" in trial_page(scaled, lost[0], tmp_path)
