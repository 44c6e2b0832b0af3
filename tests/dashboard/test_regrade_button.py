"""The batch page's Re-grade button: the current eval file's checks run on the batch's stored
trials as a new batch, whose page says where it came from and which trials changed."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e.running import write_eval
from factories import make_cast

from evals_app.models import Batch, Trial
from runner.batches.planning import Selection, load_suites, plan_batch, record_locally
from runner.batches.submission import build_submission
from runner.jobs import eval_code
from runner.jobs.execution import run_trial_by_id

AGENT = """#!/usr/bin/env bash
echo run >> {runs}
echo four > answer.txt
echo '{{"_tag":"Message","role":"assistant","text":"Wrote four."}}'
"""

EVAL = """
from proctor import case, profile, suite, variant

LIMIT = {limit}


def short_answer(ctx):
    return len(ctx.read_text("answer.txt").strip()) <= LIMIT


words = suite(
    "words",
    prompt="Write a short word",
    cases=[case("short", validate=short_answer)],
    variants=[variant("command", name="writer",
        profile=profile("writer", dir={agent!r}, run='bash "$PROCTOR_PROFILE_DIR/writer.sh"'))],
)
"""


@pytest.fixture
def proctor_folders(settings, tmp_path: Path) -> None:
    settings.PROCTOR_HOME = tmp_path / "proctor-home"
    settings.CACHE_DIR = tmp_path / "proctor-home" / "cache"
    settings.ARTIFACTS_DIR = tmp_path / "proctor-home" / "artifacts"
    settings.WORKSPACE_STORE = tmp_path / "proctor-home" / "artifacts" / "workspaces"


@pytest.fixture
def queued(monkeypatch) -> list[int]:
    """Trial ids the button queues, run by the test itself."""
    ids: list[int] = []
    monkeypatch.setattr("dashboard.views.reruns.enqueue", lambda trial_ids: ids.extend(trial_ids))
    return ids


@pytest.mark.usefixtures("transactional_db", "proctor_folders")
def test_the_button_re_grades_the_batch_and_its_page_shows_what_changed(
    client, tmp_path: Path, queued: list[int]
) -> None:
    cast = make_cast()
    agent = tmp_path / "agent"
    agent.mkdir()
    runs = tmp_path / "agent-runs.txt"
    (agent / "writer.sh").write_text(AGENT.format(runs=runs))
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "pyproject.toml").write_text("")
    eval_file = write_eval(
        tmp_path / "project", "words.eval.py", EVAL.format(limit=3, agent=str(agent))
    )
    planned = plan_batch(load_suites([str(eval_file)]), Selection())
    submission = build_submission(planned, {}, max_bytes=10 * 1024 * 1024)
    batch, (trial_id,), _ = record_locally(cast.acme, submission)
    assert run_trial_by_id(trial_id) == "failed"
    eval_code.forget()

    client.force_login(cast.alice)
    page = client.get(f"/batches/{batch.pk}/").content.decode()
    assert f'action="/batches/{batch.pk}/regrade/"' in page
    assert 'id="regrade-batch"' in page

    eval_file.write_text(eval_file.read_text().replace("LIMIT = 3", "LIMIT = 10"))
    response = client.post(f"/batches/{batch.pk}/regrade/")

    regrade = Batch.objects.order_by("-id").first()
    assert regrade is not None and regrade.pk != batch.pk
    assert response.status_code == 302 and response["Location"] == f"/batches/{regrade.pk}/"
    assert regrade.label == f"re-graded from batch {batch.pk} with checks of v2"
    assert regrade.created_by == cast.alice
    (queued_id,) = queued
    assert run_trial_by_id(queued_id) == "passed", Trial.objects.get(pk=queued_id).error
    assert runs.read_text().splitlines() == ["run"]  # the agent ran once, for the original

    page = client.get(f"/batches/{regrade.pk}/").content.decode()
    assert f"re-graded from batch {batch.pk} with checks of v2" in page
    assert f'<a href="/batches/{batch.pk}/">batch #{batch.pk}</a> re-graded, no agent run' in page
    assert "<strong>failed → passed</strong>" in page
    assert (
        f'href="/compare/?a={batch.pk}&amp;b={regrade.pk}" title="Compare with the batch it re-graded"'
        in page
    )


@pytest.mark.usefixtures("transactional_db", "proctor_folders")
def test_charlie_cannot_re_grade_a_batch_of_another_organization(client, queued) -> None:
    cast = make_cast()
    batch = Batch.objects.create(organization=cast.acme)
    client.force_login(cast.charlie)
    response = client.post(f"/batches/{batch.pk}/regrade/")
    assert response.status_code == 404
    assert Batch.objects.count() == 1 and queued == []


# Fails on its first run only: the batch's first trial fails, every later run passes.
LEARNER = """#!/usr/bin/env bash
echo run >> {runs}
if [ "$(wc -l < {runs})" -eq 1 ]; then echo bad > answer.txt; else echo ok > answer.txt; fi
"""

OK_EVAL = """
from proctor import case, profile, suite, variant


def says_ok(ctx):
    return {{"passed": ctx.read_text("answer.txt").strip() == "ok", "message": "{message}"}}


words = suite(
    "words",
    prompt="Say ok",
    trials=2,
    cases=[case("ok", validate=says_ok)],
    variants=[variant("command", name="learner",
        profile=profile("learner", dir={agent!r}, run='bash "$PROCTOR_PROFILE_DIR/learner.sh"'))],
)
"""


@pytest.mark.usefixtures("transactional_db", "proctor_folders")
def test_a_batch_with_a_rerun_is_re_graded_as_its_merged_view(
    client, tmp_path: Path, queued: list[int], monkeypatch
) -> None:
    cast = make_cast()
    agent = tmp_path / "agent"
    agent.mkdir()
    runs = tmp_path / "agent-runs.txt"
    (agent / "learner.sh").write_text(LEARNER.format(runs=runs))
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "pyproject.toml").write_text("")
    eval_file = write_eval(
        tmp_path / "project", "ok.eval.py", OK_EVAL.format(message="v1", agent=str(agent))
    )
    planned = plan_batch(load_suites([str(eval_file)]), Selection())
    batch, (first, second), _ = record_locally(
        cast.acme, build_submission(planned, {}, max_bytes=10 * 1024 * 1024)
    )
    assert [run_trial_by_id(first), run_trial_by_id(second)] == ["failed", "passed"]
    rerun_ids: list[int] = []
    monkeypatch.setattr("runner.batches.reruns.enqueue", lambda ids: rerun_ids.extend(ids))
    client.force_login(cast.alice)
    client.post(f"/batches/{batch.pk}/rerun-failed/")
    (rerun,) = rerun_ids
    assert run_trial_by_id(rerun) == "passed"

    eval_file.write_text(eval_file.read_text().replace('"v1"', '"v2"'))
    client.post(f"/batches/{batch.pk}/regrade/")

    # The failed first trial was replaced by its rerun: those are the trials graded again.
    regrade = Batch.objects.order_by("-id").first()
    assert regrade is not None
    (run,) = regrade.runs.all()
    assert sorted(run.spec["regrade_of"]) == sorted([rerun, second])
    assert [run_trial_by_id(trial_id) for trial_id in queued] == ["passed", "passed"]
    assert set(
        Trial.objects.filter(run__batch=regrade).values_list("checks__message", flat=True)
    ) == {"v2"}
    assert len(runs.read_text().splitlines()) == 3
