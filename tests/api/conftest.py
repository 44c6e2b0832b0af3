"""The fixed cast: alice owns acme, bob is a member of acme, charlie belongs to globex only."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from rest_framework.test import APIClient

from .factories import (
    make_batch,
    make_case,
    make_definition,
    make_org,
    make_user,
    make_variant,
)


@pytest.fixture
def acme(db):
    return make_org("acme")


@pytest.fixture
def globex(db):
    return make_org("globex")


@pytest.fixture
def alice(acme):
    return make_user("alice", acme)


@pytest.fixture
def bob(acme):
    return make_user("bob", acme)


@pytest.fixture
def charlie(globex):
    return make_user("charlie", globex)


@pytest.fixture
def acme_world(acme):
    """Two suites, three cases (one with two versions), two variants, one finished batch with
    three trials per run: passed, failed, errored."""
    health = make_case(
        acme,
        "health-route",
        tags=["http", "smoke"],
        definitions=[
            make_definition("api", "health-route"),
            make_definition("api", "health-route", timeout_ms=1800000),
        ],
    )
    login = make_case(acme, "login-form", suite_slug="web", tags=["ui"])
    search = make_case(acme, "search-box", suite_slug="web", tags=["ui", "smoke"])
    claude = make_variant(acme, "claude", harness="claude-code", model="sonnet")
    codex = make_variant(acme, "codex", harness="codex", model="gpt-5")
    batch = make_batch(acme, [health, login], [claude, codex])
    return SimpleNamespace(
        org=acme,
        cases=[health, login, search],
        variants=[claude, codex],
        batch=batch,
        runs=list(batch.runs.order_by("id")),
    )


@pytest.fixture
def globex_world(globex):
    secret = make_case(globex, "secret-case", suite_slug="internal")
    variant = make_variant(globex, "globex-agent")
    batch = make_batch(globex, [secret], [variant], statuses=["passed"])
    return SimpleNamespace(org=globex, cases=[secret], variants=[variant], batch=batch)


@pytest.fixture
def api_as():
    """A signed-in API client for a user (session auth, as the browser uses)."""

    def client_for(user) -> APIClient:
        client = APIClient()
        client.force_login(user)
        return client

    return client_for


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    # Every test signs users in; the production hasher is deliberately slow.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
