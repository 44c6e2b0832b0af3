"""The endpoints `proctor eval --server` uses, in process: which bundles are missing, uploading
one (verified, idempotent, bounded), and who may act in which organization."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile

import pytest
from rest_framework.test import APIClient

from evals_app.models import Batch, Bundle, Trial


def tree_bundle(files: dict[str, bytes]) -> tuple[str, bytes]:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(raw.getvalue()).hexdigest(), gzip.compress(raw.getvalue(), mtime=0)


DIGEST, DATA = tree_bundle({"checks.eval.py": b"print('hi')\n"})
OTHER_DIGEST = "0" * 64
SHAPED = {"format": 2, "options": {}, "cases": [], "variants": [], "runs": [{"case": 0}]}


def put(client, digest: str, data: bytes, **params):
    query = "&".join(f"{k}={v}" for k, v in {"kind": "tree", **params}.items())
    return client.put(
        f"/api/bundles/{digest}/?{query}", data=data, content_type="application/octet-stream"
    )


def test_it_lists_the_digests_the_organization_lacks(api_with_token, alice, acme, settings):
    settings.BUNDLE_MAX_BYTES = 1234
    Bundle.objects.create(organization=acme, digest=DIGEST, kind="tree", size=1, data=b"x")

    response = api_with_token(alice).post(
        "/api/bundles/missing/", {"digests": [DIGEST, OTHER_DIGEST]}, format="json"
    )

    assert response.status_code == 200
    assert response.json() == {"missing": [OTHER_DIGEST], "max_bytes": 1234}


def test_it_stores_an_uploaded_bundle_once(api_with_token, alice, acme):
    client = api_with_token(alice)

    first = put(client, DIGEST, DATA, organization="acme")
    second = put(client, DIGEST, DATA, organization="acme")

    assert first.status_code == 201, first.json()
    assert second.status_code == 200
    assert first.json() == {"digest": DIGEST, "kind": "tree", "size": len(DATA)}
    assert Bundle.objects.filter(organization=acme, digest=DIGEST).count() == 1
    assert bytes(Bundle.objects.get(digest=DIGEST).data) == DATA


def test_it_refuses_a_tree_whose_content_is_not_its_digest(api_with_token, alice, acme):
    response = put(api_with_token(alice), OTHER_DIGEST, DATA)

    assert response.status_code == 400
    assert response.json() == {
        "problems": [f"bundle {OTHER_DIGEST} holds content whose digest is {DIGEST}"]
    }
    assert not Bundle.objects.exists()


def test_it_refuses_a_body_that_is_not_gzip(api_with_token, alice, acme):
    response = put(api_with_token(alice), DIGEST, b"not a bundle")

    assert response.status_code == 400
    assert response.json() == {"problems": [f"bundle {DIGEST} is not a readable tree bundle"]}


def test_it_refuses_a_bundle_over_the_limit_with_413(api_with_token, alice, acme, settings):
    settings.BUNDLE_MAX_BYTES = len(DATA) - 1

    response = put(api_with_token(alice), DIGEST, DATA)

    assert response.status_code == 413
    assert "PROCTOR_BUNDLE_MAX_MB" in response.json()["detail"]
    assert not Bundle.objects.exists()


def test_it_answers_404_for_an_organization_of_someone_else(api_with_token, alice, globex):
    client = api_with_token(alice)

    listed = client.post(
        "/api/bundles/missing/", {"organization": "globex", "digests": [DIGEST]}, format="json"
    )
    uploaded = put(client, DIGEST, DATA, organization="globex")
    submitted = client.post(
        "/api/submissions/", {"organization": "globex", "submission": SHAPED}, format="json"
    )

    for response in (listed, uploaded, submitted):
        assert response.status_code == 404
        assert response.json() == {"detail": "no organization globex for this user"}
    assert not Bundle.objects.exists()


def test_it_asks_a_member_of_several_organizations_to_name_one(api_with_token, dana):
    response = api_with_token(dana).post(
        "/api/bundles/missing/", {"digests": [DIGEST]}, format="json"
    )

    assert response.status_code == 400
    assert response.json() == {
        "problems": ["user dana is in several organizations (acme, globex): name one with --org"]
    }


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.post("/api/bundles/missing/", {"digests": []}, format="json"),
        lambda c: put(c, DIGEST, DATA),
        lambda c: c.post("/api/submissions/", {"submission": {}}, format="json"),
        lambda c: c.get("/api/batches/1/report/"),
    ],
)
def test_every_endpoint_needs_a_valid_token(acme, call):
    anonymous = APIClient()
    forged = APIClient()
    forged.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")

    # Session auth comes first in settings and names no WWW-Authenticate scheme: 403, not 401.
    assert call(anonymous).json() == {"detail": "Authentication credentials were not provided."}
    assert call(forged).json() == {"detail": "Invalid token."}
    assert call(forged).status_code == 403
    assert not Bundle.objects.exists()


def test_it_lists_a_malformed_submission_line_by_line(api_with_token, alice):
    response = api_with_token(alice).post(
        "/api/submissions/", {"submission": {"format": 1}}, format="json"
    )

    assert response.status_code == 400
    assert response.json() == {
        "problems": [
            "submission: submission is of format 1; this server takes format 2 (install the "
            "same Proctor version as the server)."
        ]
    }


def test_it_refuses_a_malformed_digest(api_with_token, alice):
    response = api_with_token(alice).post(
        "/api/bundles/missing/", {"digests": ["abc"]}, format="json"
    )

    assert response.status_code == 400


SMALL_EVAL = """
from proctor import case, profile, suite, variant


def wrote_total(ctx):
    return "total = 6" in ctx.read_text("total.ts")


s = suite(
    "shop",
    prompt="Fix the total",
    cases=[case("fix-total", validate=[wrote_total])],
    variants=[variant("command", profile=profile("echo", dir="./agent", run="bash $PROCTOR_PROFILE_DIR/a.sh"))],
)
"""


@pytest.fixture
def built(tmp_path, monkeypatch):
    """A real submission built from a small eval folder, as `proctor eval --server` makes it."""
    from runner.batches.planning import Selection, load_suites, plan_batch
    from runner.batches.submission import build_submission

    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "a.sh").write_text("echo 'total = 6' > total.ts\n")
    (tmp_path / "shop.eval.py").write_text(SMALL_EVAL)
    monkeypatch.chdir(tmp_path)
    planned = plan_batch(load_suites([]), Selection())
    return build_submission(planned, {"paths": [], "label": ""}, max_bytes=10**6)


def upload_all(client, built) -> None:
    for digest, bundle in built.bundles.items():
        assert put(client, digest, bundle.data, kind=bundle.kind).status_code == 201


def test_it_records_a_submission_and_queues_it_after_the_commit(
    api_with_token, alice, acme, built, monkeypatch, django_capture_on_commit_callbacks
):
    queued: list[list[int]] = []
    monkeypatch.setattr("runner.jobs.dispatch.enqueue", lambda ids: queued.append(list(ids)))
    client = api_with_token(alice)
    upload_all(client, built)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/api/submissions/", {"submission": built.value}, format="json")

    assert response.status_code == 201, response.json()
    body = response.json()
    batch = Batch.objects.get(pk=body["batch"])
    assert batch.organization == acme and batch.created_by == alice
    assert body == {
        "batch": batch.pk,
        "trials": 1,
        "new_versions": 1,
        "url": f"http://testserver/batches/{batch.pk}/",
    }
    assert queued == [list(Trial.objects.filter(run__batch=batch).values_list("id", flat=True))]
    report = client.get(f"/api/batches/{batch.pk}/report/").json()
    assert report["batch"] == batch.pk
    assert [(r["case"], r["variant"]) for r in report["runs"]] == [("fix-total", "command:echo")]
    # Its links lead to this server, as the submission's url does.
    assert report["url"] == body["url"]
    (run,) = report["runs"]
    assert run["url"].startswith("http://testserver/runs/")
    assert all(t["url"].startswith("http://testserver/trials/") for t in run["trials"])


def test_it_records_nothing_when_a_bundle_was_not_uploaded(
    api_with_token, alice, acme, built, monkeypatch
):
    monkeypatch.setattr("runner.jobs.dispatch.enqueue", lambda ids: pytest.fail("queued"))

    response = api_with_token(alice).post(
        "/api/submissions/", {"submission": built.value}, format="json"
    )

    assert response.status_code == 400
    problems = response.json()["problems"]
    assert len(problems) == len(built.bundles)
    assert all("was not uploaded" in p for p in problems)
    assert not Batch.objects.exists()


def test_another_organizations_batch_report_is_not_found(api_with_token, charlie, acme):
    batch = Batch.objects.create(organization=acme)

    response = api_with_token(charlie).get(f"/api/batches/{batch.pk}/report/")

    assert response.status_code == 404


def test_it_refuses_adaptive_trials_that_break_the_suite_rule(
    api_with_token, alice, acme, built, monkeypatch
):
    monkeypatch.setattr("runner.jobs.dispatch.enqueue", lambda ids: pytest.fail("queued"))
    client = api_with_token(alice)
    upload_all(client, built)
    built.value["runs"][0]["adaptive"] = {"min": 9, "max": 3, "threshold": 0.5, "confidence": 0.95}

    response = client.post("/api/submissions/", {"submission": built.value}, format="json")

    assert response.status_code == 400
    assert response.json()["problems"] == [
        "a run's trials: adaptive min (9) must not exceed its max (3)"
    ]
    assert not Batch.objects.exists()
