"""A batch stopped by its budget, as the pages show it (issue 32): the batch says "stopped:
budget reached at $X", a cell counts its budget_exhausted trials apart (neither failed nor
errored, and out of its pass rate), the trial page names the status, the API counts it, and
the rerun buttons carry a cost forecast from the variants' history."""

from __future__ import annotations

import pytest
from factories import (
    make_batch,
    make_case,
    make_cast,
    make_run,
    make_trial,
    make_variant,
    make_version,
)

from evals_app.models import Trial

pytestmark = pytest.mark.django_db

S = Trial.Status


@pytest.fixture
def stopped():
    cast = make_cast()
    batch = make_batch(cast.acme, status="finished", max_cost_usd=0.5, budget_reached_usd=0.6)
    billed = make_variant(cast.acme, "billed")
    unpriced = make_variant(cast.acme, "unpriced")
    version = make_version(make_case(cast.acme, "health-route"))
    run = make_run(batch, version, billed)
    for index in range(3):
        make_trial(run, index, S.PASSED, cost_usd=0.2)
    make_trial(run, 3, S.FAILED, cost_usd=0.1)
    stopped = [make_trial(run, index, S.BUDGET_EXHAUSTED) for index in (4, 5)]
    other = make_run(batch, version, unpriced)
    make_trial(other, 0, S.ERRORED)
    return cast, batch, run, stopped


def test_the_grid_says_the_batch_stopped_at_its_budget(client, stopped) -> None:
    cast, batch, run, _ = stopped
    client.force_login(cast.alice)

    page = client.get(f"/batches/{batch.pk}/").content.decode()

    assert "stopped: budget reached at $0.6000" in page
    cell = page[page.index(f'id="cell-{run.pk}"') :]
    cell = cell[: cell.index("</td>")]
    # 3 of the 4 trials with a result passed (75%); the two the budget ended are counted apart.
    assert "3/6" in cell and "--rate: 0.750" in cell
    assert 'class="mark mark--budget" title="2 stopped by the batch\'s budget">$2</span>' in cell
    assert "1 failed · 2 stopped by the budget" in cell
    assert "not finished" not in cell


def test_the_trial_page_and_the_api_name_the_status(client, stopped) -> None:
    cast, batch, _, trials = stopped
    client.force_login(cast.bob)

    trial_page = client.get(f"/trials/{trials[0].pk}/").content.decode()
    counts = client.get(f"/api/batches/{batch.pk}/").json()["trial_counts"]

    assert "status--budget_exhausted" in trial_page
    assert "Budget Exhausted" in trial_page
    assert counts["budget_exhausted"] == 2
    assert counts["failed"] == 1 and counts["errored"] == 1


def test_the_rerun_buttons_carry_a_forecast_from_history(client, stopped) -> None:
    cast, batch, _, _ = stopped
    client.force_login(cast.alice)

    page = client.get(f"/batches/{batch.pk}/").content.decode()

    forecast = page[page.index('id="rerun-forecast"') :]
    forecast = forecast[: forecast.index("</p>")]
    # billed: 6 trials at the median of 0.2, 0.2, 0.2 and 0.1 (the cheapest and the dearest
    # make the range); unpriced has no trial of known cost.
    assert (
        "rerun batch: $1.20 ($0.6000–$1.20) + variants without history · "
        "rerun failed: $0.2000 ($0.1000–$0.2000) + variants without history · "
        "rerun errored: no cost history" in forecast
    )
    assert "Forecast: $1.20 ($0.6000–$1.20) from recent trials, not counting unpriced" in page
