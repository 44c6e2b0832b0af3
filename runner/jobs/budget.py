"""A batch stopped at its budget (issue 32): after each trial ends, the batch's spent cost is
read from its runs' counts; once it reaches the cap, every trial not yet ended is ended as
budget_exhausted (``Batch.stop_at_budget``).

The same in every mode, because it rides on the lease fence: a queued trial can no longer be
claimed, and a running one, in this process, in a sibling `proctor eval -j N` worker or in a
`proctor worker` on another machine, finds its lease gone at its next flush or heartbeat
(PROCTOR_LEASE_S / 3) and ends its agent's processes, recording nothing more."""

from __future__ import annotations

from evals_app.models import Batch, Trial
from runner.jobs import leases, publishing


def stop_if_over_budget(batch: Batch) -> int:
    """End the batch's unfinished trials when its cost reached its cap; how many were ended.
    One query when the batch has a cap and is under it, none without a cap."""
    if batch.max_cost_usd is None:
        return 0
    ended = batch.stop_at_budget()
    if ended:
        # This process's own running trials (a pool's threads) learn it now, not at a beat.
        leases.renew_now()
        for trial_id, run_id in ended:
            publishing.trial_changed(
                trial_id=trial_id,
                run_id=run_id,
                batch_id=batch.pk,
                status=Trial.Status.BUDGET_EXHAUSTED,
                wait=False,
            )
    return len(ended)
