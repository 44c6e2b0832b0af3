"""The trial page shows the agent's calls to the case's mocks: in the transcript between the
events they happened between (method, path, status, body, time), and in a Mocks tab per mock,
the mocks that got no call included."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from factories import (
    make_batch,
    make_case,
    make_cast,
    make_definition,
    make_run,
    make_trial_with_events,
    make_variant,
    make_version,
)

from evals_app.models import Event
from runner.core.mock_calls import MockCall
from runner.jobs.mock_call_rows import store_mock_calls

pytestmark = pytest.mark.django_db


@pytest.fixture
def cast():
    return make_cast()


@pytest.fixture
def trial(cast):
    definition = make_definition("api", "refund")
    definition["mocks"] = [
        {"kind": "api", "name": "billing", "env": "BILLING_URL", "routes": {}},
        {"kind": "cli", "name": "gh", "script": [], "handler": None},
    ]
    batch = make_batch(cast.acme, status="finished")
    version = make_version(make_case(cast.acme, "refund"), definition=definition)
    return make_trial_with_events(make_run(batch, version, make_variant(cast.acme, "careful")))


def test_the_trial_page_shows_the_refund_call_in_the_transcript_and_the_mocks_tab(
    client, cast, trial
):
    events = list(Event.objects.filter(trial=trial).order_by("seq"))
    # Made after the agent's first message and before its command (events[2]).
    between = events[1].at + (events[2].at - events[1].at) / 2
    call = MockCall(
        mock="billing",
        kind="api",
        seq=1,
        at=between.timestamp(),
        method="POST",
        path="/refunds",
        status=201,
        headers={"authorization": "[redacted]", "content-type": "application/json"},
        body={"order_id": 42, "amount": 30.0},
        response={"id": "re_1"},
    )
    store_mock_calls(trial.pk, json.dumps(call.to_json()) + "\n")
    client.force_login(cast.alice)

    html = client.get(f"/trials/{trial.pk}/").content.decode()

    shown = html.index('class="event event--mockcall"')
    assert html.index("I&#x27;ll add the route") < shown < html.index("pytest -q</code>")
    call_html = html[shown : html.index("</div>\n</div>", shown)]
    assert "POST /refunds" in call_html and ">201<" in call_html
    assert "&quot;order_id&quot;: 42" in call_html and "re_1" in call_html
    assert "authorization: [redacted]" in call_html
    assert between.strftime("%H:%M:%S") in call_html
    # The Mocks tab lists each mock of the case, with its calls and its log file.
    assert '<a href="#mocks">Mocks' in html
    mocks = html[html.index('id="mocks"') :]
    assert "billing" in mocks and "1 call" in mocks and "mocks/billing.jsonl" in mocks
    assert "gh" in mocks and "0 calls" in mocks


def test_a_trial_whose_case_has_no_mocks_shows_no_mocks_tab(client, cast):
    batch = make_batch(cast.acme, status="finished")
    version = make_version(make_case(cast.acme, "plain"))
    plain = make_trial_with_events(make_run(batch, version, make_variant(cast.acme, "careful")))
    client.force_login(cast.alice)
    html = client.get(f"/trials/{plain.pk}/").content.decode()
    assert 'href="#mocks"' not in html and "event--mockcall" not in html


def test_calls_after_the_last_event_close_the_transcript(client, cast, trial):
    last = Event.objects.filter(trial=trial).order_by("-seq").first()
    call = MockCall(
        mock="gh", kind="cli", seq=1, at=(last.at + timedelta(seconds=5)).timestamp(),
        method="gh", path="gh pr create --title Fix", status=0, argv=["gh", "pr", "create"],
        response="https://github.com/o/r/pull/1\n",
    )  # fmt: skip
    store_mock_calls(trial.pk, json.dumps(call.to_json()) + "\n")
    client.force_login(cast.alice)
    html = client.get(f"/trials/{trial.pk}/").content.decode()
    assert html.index("Done: /health returns 200.") < html.index("gh pr create --title Fix")
    assert "exit 0" in html[html.index("gh pr create --title Fix") :]
