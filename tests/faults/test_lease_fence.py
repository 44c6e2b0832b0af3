"""Every write of a trial's events, turns and checks is fenced by its lease (issue 36, item 4).

The fault, made for real on the database: process A claims a trial and records it; A stalls,
its lease lapses, and another claim (process B) takes the trial over and records its own run.
A, not knowing yet, goes on reporting events, a finished turn, a check and a mock call. None
of it lands after the takeover, whichever write of A's finds the lease gone first (a flush,
the heartbeat, or the trial's final row); A stops, ends its agent, and says in one line what
became of the trial. B's history is exactly what B wrote.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import pytest
from api.factories import make_batch, make_case, make_org, make_variant
from django.utils import timezone

from evals_app.models import Batch, Check, Event, MockCall, Trial, Turn
from proctor.agent_events import AgentEvent
from runner.core.reporting import TrialOutcome
from runner.core.results import CheckResult
from runner.jobs import leases
from runner.jobs.database_recorder import DatabaseRecorder

pytestmark = pytest.mark.django_db

B = "host-b:202:bbbb"


@pytest.fixture(autouse=True)
def own_artifacts_folder(settings, tmp_path):
    settings.ARTIFACTS_DIR = tmp_path / "artifacts"


@pytest.fixture
def trial() -> Trial:
    org = make_org("acme")
    batch = make_batch(org, [make_case(org, "health")], [make_variant(org, "careful")], statuses=[])
    Batch.objects.filter(pk=batch.pk).update(status=Batch.Status.QUEUED, finished_at=None)
    return Trial.objects.create(run=batch.runs.get(), index=0)


def message(text: str) -> AgentEvent:
    return AgentEvent("Message", {"role": "assistant", "text": text})


def mock_call(seq: int, path: str) -> dict:
    return {"mock": "billing", "kind": "api", "seq": seq, "at": time.time(), "method": "POST",
            "path": path, "status": 201, "duration_ms": 1}  # fmt: skip


def claim(trial: Trial, owner: str) -> Trial:
    claimed = Trial.claim(trial.pk, owner, lease_s=30, max_attempts=3)
    assert claimed is not None, f"{owner} could not claim the trial"
    return claimed


def take_over(trial: Trial) -> Trial:
    """A stalls past its lease, and B's claim takes the trial over (attempt 2)."""
    Trial.objects.filter(pk=trial.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    return claim(trial, B)


def lost_lines(caplog) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.WARNING and "lost its lease" in record.getMessage()
    ]


@pytest.mark.parametrize("found_by", ["a-flush", "the-heartbeat", "the-final-row"])
def test_a_process_whose_trial_was_claimed_again_writes_nothing_more_and_says_why(
    trial, caplog, found_by
):
    a_owner = leases.owner()  # A is this process, so its heartbeat can look for the lease
    agent_ended: list[str] = []
    a = DatabaseRecorder(
        claim(trial, a_owner), owner=a_owner, on_lost=lambda: agent_ended.append("A")
    )
    a.trial_started()
    a.turn_started(0, "A's prompt", origin={}, mode="")
    a.many_events(0, [message("A before the takeover")])
    a.mock_call(mock_call(1, "/a-before"))
    a.flush()
    assert Event.objects.filter(trial=trial).count() == 1  # A's writes land while it holds it

    b_trial = take_over(trial)
    assert (b_trial.attempt, b_trial.lease_owner) == (2, B)
    b = DatabaseRecorder(b_trial, owner=B, events_stored=0)
    b.trial_started()
    b.turn_started(0, "B's prompt", origin={}, mode="")
    b.many_events(0, [message("B's first event")])
    b.mock_call(mock_call(1, "/b"))
    b.flush()

    # A, not knowing yet, goes on recording its run.
    if found_by == "the-heartbeat":
        with leases.holding(trial.pk, on_lost=a.lease_lost):
            assert leases.renew_now() == 0
    a.many_events(0, [message("A after the takeover")])
    a.turn_finished(0, answer="A's answer", usage={"input_tokens": 5, "output_tokens": 7})
    a.check(0, CheckResult(name="A's check", kind="command", passed=True))
    a.mock_call(mock_call(2, "/a-after"))
    a.artifact("mocks/billing.jsonl", '{"mock": "billing", "seq": 1, "path": "/a-log"}\n')
    if found_by == "a-flush":
        a.flush()
    a.trial_finished(TrialOutcome("passed", answer="A's final answer"))

    assert a.lost.is_set()
    assert agent_ended == ["A"]  # its agent is ended, once
    [line] = lost_lines(caplog)  # says why, once, in one line
    assert line.startswith(f"trial {trial.pk} is already being run elsewhere (by {B})")
    # What it held when it found out: nothing yet, when the heartbeat found out first.
    held = (
        "0 events, 0 turns and 0 checks"
        if found_by == "the-heartbeat"
        else ("1 event, 1 turn and 1 check")
    )
    assert f"({held} it held are not written)" in line
    assert "\n" not in line
    # Nothing of A's landed after the takeover, and the trial is still B's, as B left it.
    stored = Trial.objects.get(pk=trial.pk)
    assert (stored.status, stored.lease_owner, stored.answer) == ("running", B, "")
    assert [e.data["text"] for e in Event.objects.filter(trial=trial)] == ["B's first event"]
    assert list(Turn.objects.filter(trial=trial).values_list("prompt", "answer")) == [
        ("B's prompt", "")
    ]
    assert not Check.objects.filter(trial=trial).exists()
    assert list(MockCall.objects.filter(trial=trial).values_list("path", flat=True)) == ["/b"]
    assert "A after the takeover" not in (a.folder / "events.jsonl").read_text()

    # B's run goes on to its end, its history whole.
    b.many_events(0, [message("B's last event")])
    b.turn_finished(0, answer="B's answer", usage={})
    b.check(0, CheckResult(name="B's check", kind="command", passed=True))
    b.trial_finished(TrialOutcome("passed", answer="B's final answer"))
    stored = Trial.objects.get(pk=trial.pk)
    assert (stored.status, stored.answer, stored.attempt) == ("passed", "B's final answer", 2)
    assert [e.data["text"] for e in Event.objects.filter(trial=trial).order_by("seq")] == [
        "B's first event",
        "B's last event",
    ]
    assert list(Turn.objects.filter(trial=trial).values_list("answer", flat=True)) == ["B's answer"]
    assert list(Check.objects.filter(trial=trial).values_list("name", flat=True)) == ["B's check"]
    assert len(lost_lines(caplog)) == 1  # B, which kept its lease, said nothing of the kind


def test_a_process_whose_trial_was_queued_again_says_so(trial, caplog):
    a_owner = leases.owner()
    a = DatabaseRecorder(claim(trial, a_owner), owner=a_owner)
    a.trial_started()
    claimed = Trial.objects.get(pk=trial.pk)
    claimed.reset()  # what the reaper does to a trial whose lease lapsed, attempts left

    a.many_events(0, [message("late")])
    a.flush()

    assert a.lost.is_set()
    [line] = lost_lines(caplog)
    assert line.startswith(f"trial {trial.pk} was queued again (its lease had lapsed)")
    assert "1 event, 0 turns and 0 checks it held are not written" in line
    assert not Event.objects.filter(trial=trial).exists()
    assert Trial.objects.get(pk=trial.pk).status == Trial.Status.QUEUED
