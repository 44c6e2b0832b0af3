"""`proctor seed-demo-data` fills an organization with a finished batch to look at."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from evals_app.models import (
    Batch,
    Case,
    CaseVersion,
    Check,
    Event,
    Organization,
    Run,
    Trial,
    Turn,
    Variant,
)


def seed(*args: str) -> str:
    out = StringIO()
    call_command("seed_demo_data", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_it_makes_the_grid_it_was_asked_for():
    output = seed("--cases", "7", "--variants", "3", "--trials", "2", "--org", "demo-small")

    org = Organization.objects.get(slug="demo-small")
    batch = Batch.objects.get(organization=org)
    assert org.cases.count() == 7
    assert org.variants.count() == 3
    assert batch.status == Batch.Status.FINISHED
    assert Run.objects.filter(batch=batch).count() == 21
    assert Trial.objects.filter(run__batch=batch).count() == 42
    assert set(Trial.objects.values_list("status", flat=True)) <= set(Trial.FINAL_STATUSES)
    assert "7 cases" in output
    assert "3 variants" in output
    assert "21 runs and 42 trials" in output


@pytest.mark.django_db
def test_it_gives_each_case_one_to_three_versions_and_runs_the_latest():
    seed("--cases", "12", "--variants", "1", "--trials", "1")

    for case in Case.objects.all():
        numbers = list(case.versions.values_list("number", flat=True))
        assert numbers == list(range(1, len(numbers) + 1))
        assert 1 <= len(numbers) <= 3
        assert Run.objects.get(case_version__case=case).case_version.number == numbers[-1]


@pytest.mark.django_db
def test_it_records_checks_turns_and_events_the_way_the_runner_would():
    seed("--cases", "10", "--variants", "4", "--trials", "3")

    for trial in Trial.objects.select_related("run__case_version"):
        checks = list(trial.checks.order_by("index"))
        events = list(trial.events.order_by("seq"))
        assert [event.seq for event in events] == list(range(len(events)))
        if trial.status == Trial.Status.ERRORED:
            assert trial.error
            assert checks == []
            assert events[0].kind == Event.Kind.LOG
            continue
        assert trial.total_tokens > 0
        assert trial.duration_ms > 0
        assert events[-1].kind == Event.Kind.FINISHED
        assert isinstance(events[-1].data, dict)
        assert trial.turns.count() == 1
        if trial.status == Trial.Status.TIMED_OUT:
            assert checks == []
            continue
        definition_checks = trial.run.case_version.definition["checks"]
        assert [check.name for check in checks] == [check["name"] for check in definition_checks]
        assert all(check.passed for check in checks) == (trial.status == Trial.Status.PASSED)


@pytest.mark.django_db
def test_it_mixes_every_final_status_in_a_large_enough_batch():
    seed("--cases", "40", "--variants", "4", "--trials", "5")

    statuses = set(Trial.objects.values_list("status", flat=True))
    assert statuses == set(Trial.FINAL_STATUSES)


@pytest.mark.django_db
def test_it_makes_the_same_data_from_the_same_seed():
    seed("--cases", "5", "--variants", "2", "--trials", "3", "--org", "first", "--seed", "7")
    seed("--cases", "5", "--variants", "2", "--trials", "3", "--org", "second", "--seed", "7")

    def outcomes(org: str) -> list[tuple]:
        trials = Trial.objects.filter(run__batch__organization__slug=org).order_by(
            "run_id", "index"
        )
        return list(trials.values_list("status", "input_tokens", "duration_ms"))

    assert outcomes("first") == outcomes("second")
    assert Check.objects.filter(trial__run__batch__organization__slug="first").count() == (
        Check.objects.filter(trial__run__batch__organization__slug="second").count()
    )


@pytest.mark.django_db
def test_it_refuses_to_seed_an_organization_that_has_cases():
    seed("--cases", "2", "--variants", "1", "--trials", "1")

    with pytest.raises(
        CommandError, match="Organization 'demo' already has cases; seed another one with --org."
    ):
        seed("--cases", "2", "--variants", "1", "--trials", "1")
    assert Case.objects.count() == 2


@pytest.mark.django_db
def test_it_rejects_a_count_below_one_and_an_organization_that_is_not_a_slug():
    with pytest.raises(CommandError, match="--trials must be 1 or more, not 0."):
        seed("--trials", "0")
    with pytest.raises(CommandError, match="--org must be lowercase letters, digits and hyphens"):
        seed("--org", "Demo Org")
    assert not Organization.objects.exists()
    assert not Variant.objects.exists()
    assert not CaseVersion.objects.exists()
    assert not Turn.objects.exists()


def test_it_serves_seeded_transcripts_through_the_api(api_as, db):
    seed("--cases", "2", "--variants", "2", "--trials", "2")
    member = User.objects.create_user("dana")
    Organization.objects.get(slug="demo").members.add(member)
    trial = Trial.objects.exclude(status=Trial.Status.ERRORED).first()

    page = api_as(member).get(f"/api/trials/{trial.id}/events/").json()

    assert [event["kind"] for event in page["results"]][0] == "Started"
    assert page["results"][-1]["data"] == {"reason": trial.finish_reason}
