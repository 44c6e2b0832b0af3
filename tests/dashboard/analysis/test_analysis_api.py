"""The analysis API: batches with filters, compare, pass@k, flaky cells, cost and the
baseline mark; each in the OpenAPI schema, each 404 for another organization."""

from __future__ import annotations

import pytest
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def api():
    def client_for(user) -> APIClient:
        client = APIClient()
        client.force_login(user)
        return client

    return client_for


def test_every_endpoint_is_in_a_valid_schema(api, cast):
    schema = api(cast.alice).get("/api/schema/?format=json").json()
    validate_schema(schema)
    assert {
        "/api/analysis/batches/",
        "/api/analysis/compare/",
        "/api/analysis/batches/{id}/pass-at-k/",
        "/api/analysis/batches/{id}/flaky/",
        "/api/analysis/batches/{id}/cost/",
        "/api/analysis/batches/{id}/baseline/",
        "/api/analysis/suites/{id}/flaky/",
    } <= set(schema["paths"])
    compare = schema["paths"]["/api/analysis/compare/"]["get"]
    assert {p["name"] for p in compare["parameters"]} >= {"a", "b", "trials", "suite"}


def test_the_batches_list_filters_and_counts(api, cast, pair):
    body = api(cast.bob).get("/api/analysis/batches/", {"label": "B"}).json()
    assert body["next"] is None and body["previous"] is None
    (b,) = body["results"]
    assert b["id"] == pair.b.pk and b["suites"] == ["api"] and b["created_by"] == "alice"
    assert b["trial_counts"]["passed"] == 19 and b["trial_counts"]["failed"] == 4
    assert b["pass_rate"] == pytest.approx(19 / 23)
    assert b["cost_usd"] == pytest.approx(0.23)
    assert b["cost_per_passed_trial_usd"] == pytest.approx(0.23 / 19)
    assert b["parent"] is None and b["is_baseline"] is False
    bad = api(cast.bob).get("/api/analysis/batches/", {"until": "soon"})
    assert bad.status_code == 400
    assert bad.json() == {"filter": "until must be a date like 2026-01-31, not 'soon'."}
    assert api(cast.charlie).get("/api/analysis/batches/").json()["results"] == []


def test_compare_puts_the_regression_first_and_names_the_test(api, cast, pair):
    response = api(cast.alice).get("/api/analysis/compare/", {"a": pair.a.pk, "b": pair.b.pk})
    assert response.status_code == 200
    body = response.json()
    assert body["headline"] == "B passes 1 fewer case than A; 2 regressions, 1 significant"
    top = body["cells"][0]
    assert (top["case"], top["variant"], top["change"], top["significant"]) == (
        "planted",
        "steady",
        "regression",
        True,
    )
    assert top["delta"] == -1.0 and top["delta_interval"][1] < 0
    assert top["a"]["interval"][1] == 1.0
    assert body["variants"][0]["test"].startswith("exact McNemar")
    assert [w["kind"] for w in body["warnings"]] == ["trial_count"]
    assert body["has_significant_regression"] is True


def test_compare_against_the_baseline_and_its_errors(api, cast, pair):
    client = api(cast.alice)
    missing = client.get("/api/analysis/compare/", {"a": "baseline", "b": pair.b.pk})
    assert missing.status_code == 400
    assert missing.json() == {"a": "No batch is marked as the baseline of api."}
    assert client.post(
        f"/api/analysis/batches/{pair.a.pk}/baseline/", {"baseline": True}, format="json"
    ).json() == {"batch": pair.a.pk, "is_baseline": True, "suites": ["api"]}
    body = client.get("/api/analysis/compare/", {"a": "baseline", "b": pair.b.pk}).json()
    assert body["a"]["id"] == pair.a.pk and body["a"]["is_baseline"] is True
    assert client.get("/api/analysis/compare/", {"b": pair.b.pk}).status_code == 400
    assert client.get("/api/analysis/compare/", {"a": "x", "b": pair.b.pk}).status_code == 400
    huge = client.get("/api/analysis/compare/", {"a": 2**70, "b": pair.b.pk})
    assert huge.status_code == 400
    assert huge.json()["a"].startswith("a must be a whole number between")
    assert (
        client.get(
            "/api/analysis/compare/", {"a": pair.a.pk, "b": pair.b.pk, "trials": "x"}
        ).status_code
        == 400
    )


def test_pass_at_k_matches_the_formulas(api, cast, pair):
    body = api(cast.alice).get(f"/api/analysis/batches/{pair.b.pk}/pass-at-k/").json()
    wobbly = next(c for c in body["cells"] if (c["case"], c["variant"]) == ("wobbly", "quick"))
    assert (wobbly["n"], wobbly["c"]) == (3, 2)
    by_k = {e["k"]: e for e in wobbly["estimates"]}
    # pass@1 = c/n; pass@2 = 1 - C(1,2)/C(3,2) = 1; pass^2 = C(2,2)/C(3,2) = 1/3; pass^3 = 0.
    assert by_k[1]["pass_at_k"] == pytest.approx(2 / 3)
    assert by_k[2]["pass_at_k"] == 1.0 and by_k[2]["pass_hat_k"] == pytest.approx(1 / 3)
    assert by_k[3]["pass_at_k"] == 1.0 and by_k[3]["pass_hat_k"] == 0.0
    quick = next(v for v in body["variants"] if v["variant"] == "quick")
    # quick's cells reach k = 2 at most (planted ran two trials).
    assert [e["k"] for e in quick["estimates"]] == [1, 2]
    only3 = api(cast.alice).get(f"/api/analysis/batches/{pair.b.pk}/pass-at-k/", {"k": 3}).json()
    assert all(c["n"] >= 3 for c in only3["cells"]) and len(only3["cells"]) == 7
    assert (
        api(cast.alice).get(f"/api/analysis/batches/{pair.b.pk}/pass-at-k/", {"k": 0}).status_code
        == 400
    )
    huge = api(cast.alice).get(f"/api/analysis/batches/{pair.b.pk}/pass-at-k/", {"k": "9" * 30})
    assert huge.status_code == 400 and "k" in huge.json()
    beyond_64_bits = api(cast.alice).get(f"/api/analysis/suites/{'9' * 30}/flaky/")
    assert beyond_64_bits.status_code == 404


def test_flaky_cells_of_a_batch_and_of_a_suite(api, cast, pair):
    body = api(cast.alice).get(f"/api/analysis/batches/{pair.b.pk}/flaky/").json()
    # wobbly disagrees within B; planted under steady across the batches (3/3, then 0/3).
    cells = {(c["case"], c["variant"]): c for c in body["cells"]}
    assert set(cells) == {("wobbly", "quick"), ("planted", "steady")}
    wobbly = cells["wobbly", "quick"]
    assert wobbly["mixed_within_batch"] and not cells["planted", "steady"]["mixed_within_batch"]
    assert [(h["batch"], h["passed"], h["graded"]) for h in wobbly["history"]] == [
        (pair.a.pk, 3, 3),
        (pair.b.pk, 2, 3),
    ]
    suite_id = pair.b.runs.first().case_version.case.suite_id
    listed = api(cast.alice).get(f"/api/analysis/suites/{suite_id}/flaky/").json()["cells"]
    assert {(c["case"], c["variant"]) for c in listed} == {
        ("wobbly", "quick"),
        ("planted", "steady"),
    }


def test_cost_per_batch_variant_and_cell(api, cast, pair):
    body = api(cast.alice).get(f"/api/analysis/batches/{pair.b.pk}/cost/").json()
    assert body["total"]["total_usd"] == pytest.approx(0.23)
    assert body["total"]["per_passed_trial_usd"] == pytest.approx(0.23 / 19, abs=1e-6)
    steady = next(v for v in body["variants"] if v["variant"] == "steady")
    assert steady["trials"] == 12 and steady["passed"] == 9
    planted = next(c for c in body["cells"] if (c["case"], c["variant"]) == ("planted", "steady"))
    assert planted["per_passed_trial_usd"] is None and planted["total_usd"] == pytest.approx(0.03)


def test_another_organization_gets_404_everywhere(api, cast, pair):
    client = api(cast.charlie)
    suite_id = pair.b.runs.first().case_version.case.suite_id
    for url in (
        f"/api/analysis/batches/{pair.b.pk}/pass-at-k/",
        f"/api/analysis/batches/{pair.b.pk}/flaky/",
        f"/api/analysis/batches/{pair.b.pk}/cost/",
        f"/api/analysis/suites/{suite_id}/flaky/",
    ):
        assert client.get(url).status_code == 404, url
    other = client.get("/api/analysis/compare/", {"a": pair.a.pk, "b": pair.b.pk})
    assert other.status_code == 404
    # The value that named it, in the same words as for a batch that does not exist.
    said = f"b: there is no batch {pair.b.pk} among your organizations' batches."
    assert other.json() == {"detail": said}
    missing = api(cast.bob).get("/api/analysis/compare/", {"a": pair.a.pk, "b": 999_999})
    assert missing.status_code == 404
    assert missing.json() == {"detail": said.replace(str(pair.b.pk), "999999")}
    assert (
        client.post(f"/api/analysis/batches/{pair.a.pk}/baseline/", {}, format="json").status_code
        == 404
    )
    pair.a.refresh_from_db()
    assert not pair.a.is_baseline
    assert APIClient().get("/api/analysis/batches/").status_code in (401, 403)
