"""Validity warnings on the grid: under each variant's header, before any pass rate, the counts
of what makes that variant's result a weaker measure (timeouts, errors, conversations cut short,
plans never left), named as benchmark.json names them."""

from __future__ import annotations

import re

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

from dashboard import fragments
from evals_app.models import Trial
from evals_app.pass_rates import validity_warnings
from runner.jobs.benchmark import summarize

pytestmark = pytest.mark.django_db

S = Trial.Status


@pytest.fixture
def cast():
    return make_cast()


def troubled_batch(cast):
    """``chatty`` has two responder stops (declined), a plan never left and a clean stop about
    the agent; ``quiet`` timed out once and ran out of turns once; ``clean`` has no warning."""
    batch = make_batch(cast.acme, status="finished")
    version = make_version(make_case(cast.acme, "ask-first"))
    chatty, quiet, clean = (
        make_run(batch, version, make_variant(cast.acme, name))
        for name in ("chatty", "quiet", "clean")
    )
    stopped = {"conversation_outcome": "stopped"}
    make_trial(
        chatty,
        0,
        S.FAILED,
        **stopped,
        stop_cause="responder_cannot_answer",
        responder_cause="declined",
    )
    make_trial(
        chatty,
        1,
        S.FAILED,
        **stopped,
        stop_cause="responder_cannot_answer",
        responder_cause="declined",
    )
    make_trial(chatty, 2, S.FAILED, plan_state="planning", conversation_outcome="completed")
    # The agent never asked when the script expected it: a result, not a threat.
    make_trial(chatty, 3, S.FAILED, **stopped, stop_cause="agent_did_not_ask")
    make_trial(quiet, 0, S.TIMED_OUT, conversation_outcome="timed_out")
    make_trial(quiet, 1, S.FAILED, **stopped, stop_cause="max_turns_reached")
    make_trial(clean, 0, S.PASSED, conversation_outcome="completed")
    return batch, chatty, quiet, clean


def header(html: str, variant_name: str) -> str:
    for th in re.findall(r'<th scope="col" class="variant-col">.*?</th>', html, re.S):
        if f'<span class="variant-name">{variant_name}</span>' in th:
            return th
    raise AssertionError(f"no column for {variant_name}")


def warnings_shown(th: str) -> list[str]:
    items = re.findall(r"<li>(.*?)</li>", th.replace("<wbr>", ""), re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", item).split()) for item in items]


def test_it_shows_validity_warnings_under_each_variants_header(client, cast):
    batch, *_ = troubled_batch(cast)
    client.force_login(cast.alice)
    html = client.get(f"/batches/{batch.pk}/").content.decode()

    # The most frequent first, then by name.
    assert warnings_shown(header(html, "chatty")) == [
        "2 responder_cannot_answer:declined",
        "1 never_left_planning",
    ]
    assert warnings_shown(header(html, "quiet")) == ["1 max_turns_reached", "1 timed_out"]
    assert warnings_shown(header(html, "clean")) == []
    # Shown before any cell of the grid.
    plain = html.replace("<wbr>", "")
    assert plain.index("responder_cannot_answer") < plain.index('class="cell')


def test_it_counts_warnings_as_benchmark_json_does(cast):
    batch, chatty, quiet, clean = troubled_batch(cast)
    by_id = validity_warnings(batch)
    by_name = {run.variant.name: by_id.get(run.variant_id, {}) for run in (chatty, quiet, clean)}
    assert by_name == {
        name: summarize(batch)["variants"][name]["validity_warnings"] for name in by_name
    }


def test_it_refreshes_a_columns_warnings_with_its_cell(cast):
    batch, chatty, *_ = troubled_batch(cast)
    make_trial(chatty, 4, S.ERRORED, error="The sandbox could not start.")

    update = fragments.grid_cell_update(batch, chatty.pk)
    block = re.search(rf'<div id="col-warnings-{chatty.variant_id}".*?</div>', update, re.S)
    assert block and 'hx-swap-oob="outerHTML"' in block.group(0)
    assert "1 errored" in warnings_shown(block.group(0))

    catch_up = fragments.grid_catch_up(batch, [chatty.pk])
    assert f'id="col-warnings-{chatty.variant_id}"' in catch_up
