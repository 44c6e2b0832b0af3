"""What the API tells a member about their suites, cases, batches, runs and trials."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evals_app.models import Turn

from .factories import make_batch, make_case, make_events, make_variant


def results(response) -> list[dict]:
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_it_lists_suites_with_their_case_counts(api_as, alice, acme_world):
    suites = results(api_as(alice).get("/api/suites/"))

    assert [(s["slug"], s["case_count"], s["organization"]) for s in suites] == [
        ("api", 1, "acme"),
        ("web", 2, "acme"),
    ]


def test_it_lists_cases_with_their_versions(api_as, alice, acme_world):
    cases = results(api_as(alice).get("/api/cases/"))
    health = next(case for case in cases if case["slug"] == "health-route")

    assert health["suite"] == "api"
    assert health["tags"] == ["http", "smoke"]
    assert [version["number"] for version in health["versions"]] == [1, 2]


@pytest.mark.parametrize(
    ("query", "slugs"),
    [
        ("suite=web", ["login-form", "search-box"]),
        ("tag=smoke", ["health-route", "search-box"]),
        ("tag=ui&suite=web", ["login-form", "search-box"]),
        ("search=login", ["login-form"]),
        ("tag=nothing", []),
    ],
)
def test_it_filters_cases_by_suite_tag_and_search(query, slugs, api_as, alice, acme_world):
    cases = results(api_as(alice).get(f"/api/cases/?{query}"))

    assert [case["slug"] for case in cases] == slugs


def test_it_lists_versions_without_sources_and_filters_them_by_case(api_as, alice, acme_world):
    versions = results(api_as(alice).get("/api/case-versions/?case=health-route"))

    assert [(v["case"], v["number"]) for v in versions] == [
        ("health-route", 1),
        ("health-route", 2),
    ]
    assert versions[1]["definition"]["limits"]["timeout_ms"] == 1800000
    assert "sources" not in versions[0]


def test_it_shows_a_versions_sources_and_what_changed(api_as, alice, acme_world):
    first, second = acme_world.cases[0].versions.order_by("number")
    client = api_as(alice)

    shown_first = client.get(f"/api/case-versions/{first.id}/").json()
    shown_second = client.get(f"/api/case-versions/{second.id}/").json()

    assert shown_first["changes"] == ["first version"]
    assert shown_second["changes"] == ["limits.timeout_ms: 900000 -> 1800000"]
    assert "def has_health_route(workspace):" in shown_second["sources"]["evals/api.eval.py"]


def test_it_lists_variants_with_their_spec(api_as, alice, acme_world):
    variants = results(api_as(alice).get("/api/variants/"))

    assert [(v["name"], v["harness"], v["model"]) for v in variants] == [
        ("claude", "claude-code", "sonnet"),
        ("codex", "codex", "gpt-5"),
    ]
    assert variants[0]["spec"]["sandbox"] == "local"


def test_it_counts_a_batchs_runs_and_trials_by_status(api_as, alice, acme_world):
    batch = api_as(alice).get(f"/api/batches/{acme_world.batch.id}/").json()

    assert batch["status"] == "finished"
    assert batch["run_count"] == 4
    assert batch["trial_counts"] == {
        "total": 12,
        "queued": 0,
        "running": 0,
        "passed": 4,
        "failed": 4,
        "timed_out": 0,
        "errored": 4,
        "budget_exhausted": 0,
    }


def test_it_filters_batches_by_status_and_rejects_an_unknown_status(api_as, alice, acme_world):
    client = api_as(alice)

    assert results(client.get("/api/batches/?status=running")) == []
    assert len(results(client.get("/api/batches/?status=finished"))) == 1
    response = client.get("/api/batches/?status=done")
    assert response.status_code == 400
    assert response.json() == {"status": "status must be one of queued, running, finished."}


def test_it_lists_a_batchs_runs_with_case_version_variant_and_pass_rate(
    api_as, alice, acme_world, globex_world
):
    runs = results(api_as(alice).get(f"/api/runs/?batch={acme_world.batch.id}"))

    assert len(runs) == 4
    first = runs[0]
    assert first["case_version"]["case"] == "health-route"
    assert first["case_version"]["number"] == 2
    assert first["variant"]["name"] == "claude"
    assert first["trial_counts"]["passed"] == 1
    assert first["trial_counts"]["total"] == 3
    assert first["pass_rate"] == pytest.approx(1 / 3)


def test_it_filters_runs_by_case_and_variant(api_as, alice, acme_world):
    codex = acme_world.variants[1]
    runs = results(api_as(alice).get(f"/api/runs/?case=login-form&variant={codex.id}"))

    assert [(r["case_version"]["case"], r["variant"]["name"]) for r in runs] == [
        ("login-form", "codex")
    ]


def test_it_rejects_a_batch_filter_that_is_not_a_number(api_as, alice, acme_world):
    response = api_as(alice).get("/api/runs/?batch=latest")

    assert response.status_code == 400
    assert response.json() == {"batch": "batch must be a whole number, not 'latest'."}


def test_it_lists_a_runs_trials_with_their_checks(api_as, alice, acme_world):
    run = acme_world.runs[0]
    trials = results(api_as(alice).get(f"/api/trials/?run={run.id}"))

    assert [t["status"] for t in trials] == ["passed", "failed", "errored"]
    assert {t["batch"] for t in trials} == {acme_world.batch.id}
    failed = trials[1]
    assert [(c["name"], c["kind"], c["passed"]) for c in failed["checks"]] == [
        ("pytest -q", "command", False),
        ("has_health_route", "validator", False),
    ]
    assert failed["checks"][1]["message"] == "no /health route"
    assert failed["total_tokens"] == 1200


def test_it_filters_trials_by_batch_and_status(api_as, alice, acme_world):
    trials = results(api_as(alice).get(f"/api/trials/?batch={acme_world.batch.id}&status=errored"))

    assert len(trials) == 4
    assert {t["status"] for t in trials} == {"errored"}


def test_it_shows_a_trials_turns_and_answer(api_as, alice, acme_world):
    trial = acme_world.runs[0].trials.get(index=0)
    trial.answer = "Added the route."
    trial.save()
    Turn.objects.create(
        trial=trial, index=0, prompt="Add a /health route", origin={}, answer="Done."
    )

    shown = api_as(alice).get(f"/api/trials/{trial.id}/").json()

    assert shown["answer"] == "Added the route."
    assert [(t["index"], t["prompt"], t["answer"]) for t in shown["turns"]] == [
        (0, "Add a /health route", "Done.")
    ]


def test_it_pages_a_long_transcript(api_as, alice, acme_world):
    trial = acme_world.runs[0].trials.first()
    make_events(trial, 1200)
    client = api_as(alice)

    first_page = client.get(f"/api/trials/{trial.id}/events/").json()
    last_page = client.get(f"/api/trials/{trial.id}/events/?page=3").json()

    assert first_page["count"] == 1200
    assert [e["seq"] for e in first_page["results"]] == list(range(500))
    assert first_page["results"][0]["data"]["text"] == "step 0"
    assert first_page["next"].endswith("page=2")
    assert [e["seq"] for e in last_page["results"]] == list(range(1000, 1200))
    assert last_page["next"] is None


def test_it_follows_a_transcript_after_a_known_event(api_as, alice, acme_world):
    trial = acme_world.runs[0].trials.first()
    make_events(trial, 30)

    page = api_as(alice).get(f"/api/trials/{trial.id}/events/?after=24&page_size=3").json()

    assert page["count"] == 5
    assert [e["seq"] for e in page["results"]] == [25, 26, 27]


def test_it_filters_events_by_kind_and_rejects_an_unknown_kind(api_as, alice, acme_world):
    trial = acme_world.runs[0].trials.first()
    make_events(trial, 3)
    client = api_as(alice)

    assert client.get(f"/api/trials/{trial.id}/events/?kind=Message").json()["count"] == 3
    assert client.get(f"/api/trials/{trial.id}/events/?kind=Command").json()["count"] == 0
    assert client.get(f"/api/trials/{trial.id}/events/?kind=Shout").status_code == 400


def count_queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert results(client.get(url))
    return len(queries.captured_queries)


@pytest.mark.parametrize(
    "endpoint", ["suites", "cases", "case-versions", "variants", "batches", "runs", "trials"]
)
def test_it_lists_a_page_in_the_same_number_of_queries_however_many_rows(
    endpoint, api_as, alice, acme_world
):
    client = api_as(alice)
    count_queries(client, f"/api/{endpoint}/")  # warm the session and content types
    before = count_queries(client, f"/api/{endpoint}/")
    more_cases = [make_case(acme_world.org, f"more-{n}", suite_slug=f"more-{n}") for n in range(3)]
    more_variants = [make_variant(acme_world.org, f"more-{n}") for n in range(3)]
    make_batch(acme_world.org, more_cases, more_variants)

    assert count_queries(client, f"/api/{endpoint}/") == before
