"""The API answers what its OpenAPI schema says: schemathesis generates requests for every GET
endpoint and the rerun actions from the project's own schema, sends them in-process to the
WSGI app as a user with a token, and checks that none is a server error and every response
conforms to the schema (status, content type, body).

Each example is sent twice: as generated (mostly ids that do not exist: a 404 the schema must
describe too) and with the path's id replaced by one of alice's objects, so the fuzzed query
values reach real rows. Examples are bounded to keep the file well under a minute.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

EXAMPLES = 25

CONFIG = SchemathesisConfig.from_dict(
    {
        "phases": {"coverage": {"enabled": False}, "stateful": {"enabled": False}},
        "generation": {"max-examples": EXAMPLES},
    }
)
schema = schemathesis.openapi.from_dict(
    SchemaGenerator().get_schema(request=None, public=True), config=CONFIG
)
schema.app = WSGIHandler()
# Every GET but the schema and its docs page, and the rerun actions.
fuzzed = schema.include(name_regex=r"^(GET /api/(?!schema/|docs/)|POST /api/.*/rerun(-case)?/$)")

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture
def token(alice, acme_world, settings) -> str:
    # Reruns are rate limited per user; the fuzzer sends far more than a person would.
    settings.PROCTOR_RERUN_RATE = "100000/minute"
    return Token.objects.create(user=alice).key


@pytest.fixture(autouse=True)
def keep_the_test_transactions_connection():
    """The WSGI handler closes "old" connections around each request, and the connection
    inside the test's transaction looks old; Django's test client disconnects them the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def real_id(path: str, world) -> int | None:
    """One of alice's objects for the resource the path names."""
    batch = world.batch
    trial = batch.runs.first().trials.first()
    ids = {
        "/api/suites/": world.cases[0].suite_id,
        "/api/cases/": world.cases[0].pk,
        "/api/case-versions/": world.cases[0].versions.first().pk,
        "/api/variants/": world.variants[0].pk,
        "/api/batches/": batch.pk,
        "/api/runs/": world.runs[0].pk,
        "/api/trials/": trial.pk,
    }
    return next((pk for prefix, pk in ids.items() if path.startswith(prefix)), None)


@fuzzed.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_every_response_matches_the_schema(case, token, acme_world):
    # The in-process (WSGI) transport does not undo gzip, which the site applies when asked.
    headers = {"Authorization": f"Token {token}", "Accept-Encoding": "identity"}
    response = case.call(headers=headers)
    case.validate_response(response, checks=CHECKS)

    pk = real_id(case.path, acme_world)
    if pk is not None and "id" in (case.path_parameters or {}):
        case.path_parameters = {**case.path_parameters, "id": pk}
        response = case.call(headers=headers)
        case.validate_response(response, checks=CHECKS)


# What the fuzzer found, each pinned as a plain example.


def test_it_documents_a_batch_without_a_creator_as_null(api_as, alice, acme_world):
    schema = api_as(alice).get("/api/schema/?format=json").json()
    assert schema["components"]["schemas"]["Batch"]["properties"]["created_by"]["nullable"]
    assert api_as(alice).get(f"/api/batches/{acme_world.batch.pk}/").json()["created_by"] is None


def test_it_documents_the_errors_every_operation_can_answer(api_as, alice):
    paths = api_as(alice).get("/api/schema/?format=json").json()["paths"]
    assert {"400", "401", "403", "404"} <= set(paths["/api/batches/"]["get"]["responses"])
    assert {"401", "403", "404"} <= set(paths["/api/batches/{id}/"]["get"]["responses"])
    assert {"400", "404", "415", "429"} <= set(paths["/api/runs/{id}/rerun/"]["post"]["responses"])


@pytest.mark.parametrize(
    "method, url",
    [
        ("get", "/api/batches/1.5/"),
        ("get", "/api/batches/a%0Ab/report/"),
        ("post", "/api/runs/-0.25/rerun/"),
        ("get", "/api/nothing-here/"),
    ],
)
def test_it_answers_an_address_no_endpoint_has_with_a_json_404(api_as, alice, method, url):
    response = getattr(api_as(alice), method)(url)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert isinstance(response.json()["detail"], str)  # DRF's "Not found." or the catch-all's
