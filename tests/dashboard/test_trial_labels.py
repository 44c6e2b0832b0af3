"""Judges checked against people: alice labels trials (on the trial page, or in the labelling
queue that steps through a batch's unlabelled trials), and each model judge's agreement with
the labels shows with kappa, TPR, TNR and the confusion matrix, on the judges page, in the API,
in `proctor judges --json` (with the labels), and on the grid once a judge disagrees on 20."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from factories import (
    make_batch,
    make_case,
    make_cast,
    make_run,
    make_trial,
    make_variant,
    make_version,
)
from rest_framework.test import APIClient

from evals_app.judge_agreement import judge_agreements
from evals_app.models import Check, Consultation, Trial, TrialLabel

pytestmark = pytest.mark.django_db
S = Trial.Status
RUBRIC = "follows the spec"


@pytest.fixture
def cast():
    return make_cast()


def _judged(run, index: int, judge_passed: bool, *, model: str = "judge-m") -> Trial:
    trial = make_trial(run, index, S.PASSED if judge_passed else S.FAILED, answer=f"answer {index}")
    Check.objects.create(trial=trial, index=0, name=RUBRIC, kind="judge", passed=judge_passed)
    Consultation.objects.create(
        trial=trial,
        kind=Consultation.Kind.JUDGE,
        check_index=0,
        model=model,
        verdict="passed" if judge_passed else "failed",
    )
    return trial


# 20 trials as (judge passed, person passed): 8 agree on pass, 4 the judge passed and people
# failed, 2 the other way, 6 agree on fail. po = 14/20 = 0.7; pe = 0.6 * 0.5 + 0.4 * 0.5 = 0.5;
# kappa = (0.7 - 0.5) / 0.5 = 0.4; TPR = 8/10, TNR = 6/10.
READINGS = [(True, True)] * 8 + [(True, False)] * 4 + [(False, True)] * 2 + [(False, False)] * 6


@pytest.fixture
def judged(cast):
    batch = make_batch(cast.acme, status="finished", label="judged")
    run = make_run(
        batch, make_version(make_case(cast.acme, "spec")), make_variant(cast.acme, "bot")
    )
    trials = [_judged(run, i, judge) for i, (judge, _) in enumerate(READINGS)]
    return batch, trials


def _label_all(client, trials, readings=READINGS) -> None:
    for trial, (_, person) in zip(trials, readings, strict=True):
        response = client.post(
            f"/trials/{trial.pk}/label/", {"verdict": "passed" if person else "failed"}
        )
        assert response.status_code == 302


def test_alice_labels_a_trial_on_its_page_and_can_change_her_mind(client, cast, judged):
    _, trials = judged
    client.force_login(cast.alice)
    page = client.get(f"/trials/{trials[0].pk}/").content.decode()
    assert 'id="trial-label"' in page and 'name="verdict" value="failed"' in page
    response = client.post(
        f"/trials/{trials[0].pk}/label/", {"verdict": "failed", "note": " misses the edge case "}
    )
    assert response.status_code == 302 and response["Location"] == f"/trials/{trials[0].pk}/"
    label = TrialLabel.objects.get(trial=trials[0])
    assert (label.verdict, label.note, label.labelled_by, label.organization) == (
        "failed",
        "misses the edge case",
        cast.alice,
        cast.acme,
    )
    page = client.get(f"/trials/{trials[0].pk}/").content.decode()
    assert 'Labelled <strong class="label-verdict">failed</strong> by alice' in page
    # htmx swaps the form in place; labelling again replaces the label.
    swapped = client.post(
        f"/trials/{trials[0].pk}/label/",
        {"verdict": "passed"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="trial-label",
    )
    assert swapped.content.decode().lstrip().startswith('<section class="card trial-label"')
    assert TrialLabel.objects.get(trial=trials[0]).verdict == "passed"
    assert TrialLabel.objects.count() == 1


def test_a_bad_verdict_is_refused_and_charlie_cannot_label(client, cast, judged):
    _, trials = judged
    client.force_login(cast.alice)
    assert client.post(f"/trials/{trials[0].pk}/label/", {"verdict": "maybe"}).status_code == 400
    client.force_login(cast.charlie)
    assert client.post(f"/trials/{trials[0].pk}/label/", {"verdict": "passed"}).status_code == 404
    assert client.get(f"/batches/{trials[0].run.batch_id}/labelling/").status_code == 404
    assert not TrialLabel.objects.exists()


def test_the_queue_steps_through_unlabelled_finished_trials(client, cast):
    batch = make_batch(cast.acme, status="running")
    run = make_run(
        batch, make_version(make_case(cast.acme, "spec")), make_variant(cast.acme, "bot")
    )
    first, second = make_trial(run, 0, answer="first answer"), make_trial(run, 1, S.FAILED)
    make_trial(run, 2, S.QUEUED)
    client.force_login(cast.bob)
    queue = f"/batches/{batch.pk}/labelling/"
    page = client.get(queue).content.decode()
    assert f'data-trial="{first.pk}"' in page and "first answer" in page
    assert "0 of 2 finished trials labelled" in page
    assert 'data-key="p"' in page and 'data-key="f"' in page and 'data-key="s"' in page
    assert "labelling.js" in page
    # Labelling from the queue comes back to the queue, on the next trial.
    response = client.post(f"/trials/{first.pk}/label/", {"verdict": "passed", "next": queue})
    assert response["Location"] == queue
    page = client.get(queue).content.decode()
    assert f'data-trial="{second.pk}"' in page and "1 of 2 finished trials labelled" in page
    skipped = client.get(queue, {"skip": str(second.pk)}).content.decode()
    assert 'id="queue-done"' in skipped and "start again with the skipped ones" in skipped
    # Another site's address is not followed.
    away = client.post(
        f"/trials/{second.pk}/label/", {"verdict": "failed", "next": "https://evil.example/"}
    )
    assert away["Location"] == f"/trials/{second.pk}/"


def test_after_twenty_labels_the_judge_shows_kappa_and_the_confusion_matrix(client, cast, judged):
    batch, trials = judged
    client.force_login(cast.alice)
    _label_all(client, trials)
    (judge,) = judge_agreements(cast.acme)
    assert (judge.rubric, judge.model, judge.agreement.n) == (RUBRIC, "judge-m", 20)
    assert judge.agreement.kappa == pytest.approx(0.4)
    assert judge.flagged
    page = client.get("/judges/").content.decode()
    assert f'data-rubric="{RUBRIC}" data-model="judge-m"' in page
    assert '<td class="num judge-kappa">0.40</td>' in page
    assert (
        '<td class="num judge-tpr">80%</td>' in page
        and '<td class="num judge-tnr">60%</td>' in page
    )
    assert '<td class="confusion-tp">8</td>' in page and '<td class="confusion-fp">4</td>' in page
    assert '<td class="confusion-fn">2</td>' in page and '<td class="confusion-tn">6</td>' in page
    assert "disagrees with people" in page
    # The grid loads a note naming the judge.
    grid = client.get(f"/batches/{batch.pk}/").content.decode()
    assert f'hx-get="/judges/?batch={batch.pk}&amp;summary=1"' in grid
    note = client.get("/judges/", {"batch": batch.pk, "summary": "1"}).content.decode()
    assert f"{RUBRIC} (judge-m): kappa 0.40 on 20 labels" in note


def test_nineteen_labels_are_not_enough_to_flag_a_judge(client, cast, judged):
    batch, trials = judged
    client.force_login(cast.alice)
    _label_all(client, trials[:19], READINGS[:19])
    (judge,) = judge_agreements(cast.acme)
    assert judge.agreement.n == 19 and not judge.flagged
    note = client.get("/judges/", {"batch": batch.pk, "summary": "1"}).content.decode()
    assert "kappa" not in note


def test_labels_survive_a_rerun_and_stay_with_their_organization(client, cast, judged):
    batch, trials = judged
    client.force_login(cast.alice)
    _label_all(client, trials)
    rerun = make_batch(cast.acme, status="finished", parent=batch)
    rerun_run = make_run(rerun, trials[0].run.case_version, trials[0].run.variant)
    _judged(rerun_run, 0, True)
    assert TrialLabel.objects.filter(organization=cast.acme).count() == 20
    assert judge_agreements(cast.acme)[0].agreement.n == 20
    assert judge_agreements(cast.globex) == []
    client.force_login(cast.charlie)
    assert f'data-rubric="{RUBRIC}"' not in client.get("/judges/").content.decode()


def test_the_api_and_the_cli_export_the_agreement_and_the_labels(client, cast, judged, capsys):
    batch, trials = judged
    client.force_login(cast.alice)
    _label_all(client, trials)
    client.post(f"/trials/{trials[0].pk}/label/", {"verdict": "passed", "note": "fine"})
    api = APIClient()
    api.force_login(cast.bob)
    (acme,) = api.get("/api/analysis/judges/", {"batch": batch.pk}).json()["organizations"]
    (judge,) = acme["judges"]
    assert judge["kappa"] == 0.4 and judge["flagged"] is True
    assert judge["confusion"] == {
        "judge_passed_person_passed": 8,
        "judge_passed_person_failed": 4,
        "judge_failed_person_passed": 2,
        "judge_failed_person_failed": 6,
    }
    assert len(acme["labels"]) == 20
    assert acme["labels"][-1]["note"] == "fine" and acme["labels"][-1]["labelled_by"] == "alice"
    api.force_login(cast.charlie)
    assert api.get("/api/analysis/judges/", {"batch": batch.pk}).status_code == 404
    assert api.get("/api/analysis/judges/").json()["organizations"][0]["judges"] == []

    call_command("judges", "--json", "--org", "acme")
    exported = json.loads(capsys.readouterr().out)
    assert exported["judges"][0]["true_positive_rate"] == 0.8
    assert {label["trial"] for label in exported["labels"]} == {t.pk for t in trials}
    call_command("judges", "--org", "acme")
    table = capsys.readouterr().out
    assert RUBRIC in table and "0.40" in table and "80%" in table and "8 4 / 2 6" in table


def test_the_grid_note_names_only_the_judges_its_batch_used(client, cast, judged):
    batch, trials = judged
    client.force_login(cast.alice)
    _label_all(client, trials)
    other = make_batch(cast.acme, status="finished")
    run = make_run(other, make_version(make_case(cast.acme, "tone")), make_variant(cast.acme, "b2"))
    trial = make_trial(run, 0)
    Check.objects.create(trial=trial, index=0, name="is polite", kind="judge", passed=True)
    Consultation.objects.create(
        trial=trial, kind=Consultation.Kind.JUDGE, check_index=0, model="judge-m", verdict="passed"
    )
    note = client.get("/judges/", {"batch": other.pk, "summary": "1"}).content.decode()
    assert "kappa" not in note
