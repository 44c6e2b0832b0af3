"""`proctor createuser`: a user who can sign in and see one organization."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from evals_app.models import Organization

pytestmark = pytest.mark.django_db


def test_it_creates_the_user_and_the_organization_and_lets_them_sign_in(client):
    call_command("createuser", "alice", org="acme", password="a-long-password")
    alice = User.objects.get(username="alice")
    assert list(alice.organizations.values_list("slug", flat=True)) == ["acme"]
    assert Organization.objects.get(slug="acme").name == "Acme"
    assert client.login(username="alice", password="a-long-password")


def test_it_reads_the_password_from_the_environment(monkeypatch, client):
    monkeypatch.setenv("PROCTOR_PASSWORD", "from-the-environment")
    call_command("createuser", "bob", org="acme")
    assert client.login(username="bob", password="from-the-environment")


def test_it_adds_an_existing_user_to_another_organization(capsys):
    call_command("createuser", "alice", org="acme", password="a-long-password")
    call_command("createuser", "alice", org="globex")
    assert sorted(
        User.objects.get(username="alice").organizations.values_list("slug", flat=True)
    ) == ["acme", "globex"]
    assert "alice updated, member of globex (new organization)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"org": "acme"},
            "Give a password with --password or the PROCTOR_PASSWORD environment variable.",
        ),
        ({"org": "acme", "password": "short"}, "This password is too short."),
        ({"org": "Acme Corp", "password": "a-long-password"}, "--org must be a slug"),
    ],
)
def test_it_refuses_a_missing_or_bad_value_in_one_sentence(monkeypatch, arguments, message):
    monkeypatch.delenv("PROCTOR_PASSWORD", raising=False)
    with pytest.raises(CommandError, match=message):
        call_command("createuser", "carol", **arguments)
    assert not User.objects.filter(username="carol").exists()
