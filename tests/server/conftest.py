"""The cast of the submission API tests: alice is in acme, charlie in globex only, dana in both."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from evals_app.models import Organization


@pytest.fixture
def acme(db) -> Organization:
    return Organization.objects.create(slug="acme", name="Acme")


@pytest.fixture
def globex(db) -> Organization:
    return Organization.objects.create(slug="globex", name="Globex")


def _member(username: str, *organizations: Organization) -> User:
    user = User.objects.create_user(username=username, password="secret-password")
    for organization in organizations:
        organization.members.add(user)
    return user


@pytest.fixture
def alice(acme) -> User:
    return _member("alice", acme)


@pytest.fixture
def charlie(globex) -> User:
    return _member("charlie", globex)


@pytest.fixture
def dana(acme, globex) -> User:
    return _member("dana", acme, globex)


@pytest.fixture
def api_with_token():
    """An API client sending the user's token, as `proctor eval --server` does."""

    def client_for(user: User) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
        return client

    return client_for


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
