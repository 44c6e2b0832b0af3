"""`proctor createtoken USERNAME`: print the API token of a user, creating it on first use."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from runner.jobs.database import ensure_database


class Command(BaseCommand):
    help = (
        "Print a user's API token (send it as 'Authorization: Token <key>'), creating it if needed."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--reset",
            action="store_true",
            help="Replace the user's token with a new one; the old token stops working.",
        )

    def handle(self, *args, username: str, reset: bool, **options) -> None:
        ensure_database()  # a fresh PROCTOR_HOME has no tables yet: say "no user", not a traceback
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(
                f"There is no user named {username!r}; create one with `proctor createuser`."
            )
        if reset:
            Token.objects.filter(user=user).delete()
        token, _ = Token.objects.get_or_create(user=user)
        # Only the key on stdout, so `TOKEN=$(proctor createtoken alice)` works.
        self.stdout.write(token.key)
