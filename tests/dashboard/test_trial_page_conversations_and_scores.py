"""The trial page of a conversation graded by weighted assertions: the weighted score against
the threshold, each assertion's type, weight, metric and score, who wrote each user turn (the
author, the responder, a simulated user, the runner) with what the model was shown, and the
warnings a reader must not miss."""

from __future__ import annotations

import json
import re

import pytest
from factories import (
    PERSONA,
    assertion_spec,
    make_assertion_check,
    make_batch,
    make_case,
    make_cast,
    make_consultation,
    make_definition,
    make_run,
    make_simulated_conversation,
    make_trial,
    make_trial_with_events,
    make_variant,
    make_version,
)

from evals_app.models import Consultation, Trial, Turn

pytestmark = pytest.mark.django_db

S = Trial.Status

CHECKS = [
    assertion_spec(
        "llm-rubric", "The demo ends up booked", name="disposition", weight=2, metric="disposition"
    ),
    assertion_spec("latency", 60000, name="latency", weight=0, metric="latency"),
    assertion_spec("icontains", "tuesday", name="icontains: tuesday", weight=1),
]


@pytest.fixture
def cast():
    return make_cast()


@pytest.fixture
def run(cast):
    batch = make_batch(cast.acme, status="finished")
    version = make_version(
        make_case(cast.acme, "book-a-demo"),
        definition=make_definition("sales", "book-a-demo", checks=CHECKS),
    )
    return make_run(batch, version, make_variant(cast.acme, "careful"))


def page(client, cast, trial) -> str:
    client.force_login(cast.alice)
    response = client.get(f"/trials/{trial.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def summary(html: str, trial: Trial) -> str:
    return re.search(
        rf'<div id="trial-summary-{trial.pk}".*?</dl>.*?(?=<nav class="section-tabs")', html, re.S
    ).group(0)


def test_it_shows_the_weighted_score_against_the_threshold(client, cast, run):
    met = make_trial(run, 0, score=0.72, threshold=0.6)
    below = make_trial(run, 1, S.FAILED, score=0.4, threshold=0.6)
    no_threshold = make_trial(run, 2, score=1.0)
    unscored = make_trial(run, 3)

    shown = text_of(summary(page(client, cast, met), met))
    assert "Weighted score 0.72 / threshold 0.60 met" in shown
    shown = text_of(summary(page(client, cast, below), below))
    assert "0.40 / threshold 0.60 below" in shown
    assert "status--failed" in summary(page(client, cast, below), below)
    shown = text_of(summary(page(client, cast, no_threshold), no_threshold))
    assert "1.00 no threshold: each weighted assertion must pass" in shown
    assert "Weighted score" not in summary(page(client, cast, unscored), unscored)


def test_it_shows_each_assertions_type_weight_metric_score_and_message(client, cast, run):
    trial = make_trial(run, 0, S.FAILED, score=0.5, threshold=0.6)
    make_assertion_check(
        trial,
        0,
        name="disposition",
        metric="disposition",
        weight=2,
        passed=False,
        score=0.25,
        message="the call ended without a booking",
    )
    make_assertion_check(
        trial,
        1,
        name="latency",
        metric="latency",
        weight=0,
        passed=True,
        message="agent time 1200 ms (at most 60000)",
    )
    make_assertion_check(
        trial,
        2,
        name="icontains: tuesday",
        metric="icontains",
        weight=1,
        passed=True,
        message="the agent said 'tuesday'",
    )
    judge = make_consultation(
        trial,
        Consultation.Kind.JUDGE,
        check_index=0,
        verdict="failed",
        reason="no booking was made",
    )
    html = page(client, cast, trial)

    def check(index: int) -> str:
        return re.search(rf'<article id="check-{index}".*?</article>', html, re.S).group(0)

    disposition = text_of(check(0))
    assert "llm-rubric" in disposition and "metric disposition" in disposition
    assert "weight 2" in disposition
    assert "failed · score 0.25" in disposition
    assert "the call ended without a booking" in disposition
    assert "The demo ends up booked" in disposition  # the rubric, as defined
    # The judge's consultation is one click away.
    assert f'href="#consultation-{judge.pk}"' in check(0)
    assert f'id="consultation-{judge.pk}"' in html

    latency = text_of(check(1))
    assert "info only" in latency and "weight 0" not in latency and "metric latency" in latency
    assert "passed · score 1.00" in latency and "agent time 1200 ms" in latency
    assert "icontains" in text_of(check(2)) and "weight 1" in text_of(check(2))


def test_it_shows_each_assertions_mean_score_on_the_run_page(client, cast, run):
    for index, score in enumerate([1.0, 0.5, 0.0]):
        make_assertion_check(
            make_trial(run, index),
            0,
            name="disposition",
            metric="disposition",
            weight=2,
            passed=score >= 0.5,
            score=score,
        )
    client.force_login(cast.alice)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    disposition = text_of(re.search(r'<article id="check-0".*?</article>', html, re.S).group(0))
    assert "mean score 0.50" in disposition and "2/3 · 67%" in disposition
    assert "weight 2" in disposition and "metric disposition" in disposition


def test_it_marks_the_simulated_users_turns_and_shows_what_it_was_shown(
    client, cast, run, tmp_path
):
    folder = tmp_path / "simulated-user" / "turn-1"
    folder.mkdir(parents=True)
    (folder / "prompt.json").write_text(json.dumps([{"role": "system", "content": PERSONA}]))
    trial = make_simulated_conversation(run, artifacts_dir=tmp_path)
    consultation = trial.consultations.get()
    html = page(client, cast, trial)

    opening = re.search(rf'<section class="turn" id="turn-{trial.pk}-0">.*?</section>', html, re.S)
    assert "authored" in opening.group(0) and "Simulated user" not in opening.group(0)
    turn = re.search(rf'<section class="turn" id="turn-{trial.pk}-1">.*?</section>', html, re.S)
    turn = turn.group(0)
    assert "chip--origin-simulated_user" in turn and ">simulated user<" in turn
    assert "msg--simulated" in turn and ">Simulated user<" in turn
    assert "persona-model" in turn
    assert f'href="#consultation-{consultation.pk}"' in turn

    shown = re.search(
        rf'<div class="verdict" id="consultation-{consultation.pk}">.*?</details>', html, re.S
    ).group(0)
    assert "Simulated user · after turn 1" in shown
    assert "What it was shown" in shown and "3 messages" in shown
    assert PERSONA in shown and "Does Tuesday at 10 suit you?" in shown
    assert f'href="/trials/{trial.pk}/artifacts/simulated-user/turn-1/prompt.json"' in shown
    # The usage table names the origin too.
    assert re.search(r"<td>simulated user</td>", html)


def test_it_shows_the_responders_verdict_reason_and_what_it_was_shown_on_its_turn(
    client, cast, run
):
    trial = make_trial_with_events(run)
    # The responder read round 0 and wrote turn 1.
    consultation = make_consultation(
        trial,
        Consultation.Kind.RESPONDER,
        turn_index=0,
        verdict="answer",
        reason="the agent asked for approval",
        prompt=[{"role": "user", "content": "Opening prompt: Add a /health route"}],
        answer="Yes, go ahead with the plan.",
    )
    html = page(client, cast, trial)
    turn = re.search(rf'<section class="turn" id="turn-{trial.pk}-1">.*?</section>', html, re.S)
    turn = turn.group(0)
    assert "chip--origin-responder" in turn and "plan mode" in turn
    assert "chip--answer" in turn and "the agent asked for approval" in turn
    assert f'href="#consultation-{consultation.pk}"' in turn
    assert "Opening prompt: Add a /health route" in html


def test_it_names_the_runners_plan_approval_and_each_turns_mode(client, cast, run):
    trial = make_trial(run, plan_state="approved", plan_signal="plan_file")
    Turn.objects.create(trial=trial, index=0, prompt="Plan the change.", mode="plan")
    Turn.objects.create(
        trial=trial,
        index=1,
        prompt="The plan is approved. Implement it now.",
        origin={"runner": "plan_approval"},
        mode="act",
    )
    html = page(client, cast, trial)
    approval = re.search(
        rf'<section class="turn" id="turn-{trial.pk}-1">.*?</section>', html, re.S
    ).group(0)
    assert "runner · plan_approval" in approval and "act mode" in approval
    assert "what it was shown" not in approval
    assert "plan mode" in html
    assert "approved" in text_of(summary(html, trial)) and "plan_file" in html


def test_it_names_why_a_simulated_user_stopped_the_conversation(client, cast, run):
    trial = make_simulated_conversation(run)
    Trial.objects.filter(pk=trial.pk).update(
        conversation_outcome="stopped",
        stop_cause="simulated_user_failed",
        responder_cause="dispatch_timed_out",
    )
    trial.refresh_from_db()
    shown = summary(page(client, cast, trial), trial)
    assert "stopped" in shown and "simulated_user_failed" in shown
    assert "dispatch_timed_out" in shown
    assert 'title="why the simulated user gave no usable reply"' in shown


def test_it_warns_when_the_agent_changed_files_outside_its_workspace(client, cast, run):
    trial = make_trial(run, outside_writes=["/home/ci/.bashrc", "/tmp/elsewhere/notes.txt"])
    shown = summary(page(client, cast, trial), trial)
    warning = re.search(r'<div class="callout callout--warn".*?</div>', shown, re.S).group(0)
    assert "changed 2 files outside its workspace" in text_of(warning)
    assert "/home/ci/.bashrc" in warning and "/tmp/elsewhere/notes.txt" in warning

    quiet = make_trial(run, 1)
    assert "callout--warn" not in summary(page(client, cast, quiet), quiet)
