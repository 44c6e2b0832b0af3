"""`proctor createuser USERNAME --org SLUG`: a user who can sign in to the dashboard and see
one organization's results.

The password comes from ``--password`` or the ``PROCTOR_PASSWORD`` environment variable (so it
stays out of shell history in scripts), or is asked for when a terminal is attached. Running it
again for an existing user adds the organization and, when a password is given, resets it.
"""

from __future__ import annotations

import getpass
import os
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils.text import slugify

from evals_app.models import Organization
from runner.jobs.database import ensure_database


class Command(BaseCommand):
    help = "Create a dashboard user in an organization (created too if it does not exist yet)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--org", required=True, metavar="SLUG", help="The organization's slug, e.g. acme."
        )
        parser.add_argument(
            "--org-name",
            default="",
            help="The organization's name when it is created (default: from the slug).",
        )
        parser.add_argument(
            "--password", default="", help="The password; else PROCTOR_PASSWORD, else asked for."
        )
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--staff",
            action="store_true",
            help="Let the user open the Django admin, to read their organizations' records.",
        )

    def handle(
        self,
        *args,
        username: str,
        org: str,
        org_name: str,
        password: str,
        email: str,
        staff: bool,
        **options,
    ) -> None:
        if slugify(org) != org:
            raise CommandError(
                f"--org must be a slug (lowercase letters, digits and hyphens), like {slugify(org)!r}."
            )
        password = password or os.environ.get("PROCTOR_PASSWORD", "") or self._ask_password()
        # The first command on a fresh machine may be this one: make the tables first.
        ensure_database()
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None and not password:
            raise CommandError(
                "Give a password with --password or the PROCTOR_PASSWORD environment variable."
            )
        if password:
            try:
                validate_password(password, user=user)
            except ValidationError as exc:
                raise CommandError(" ".join(exc.messages)) from None

        with transaction.atomic():
            organization, org_created = Organization.objects.get_or_create(
                slug=org, defaults={"name": org_name or org.replace("-", " ").title()}
            )
            created = user is None
            if user is None:
                user = User.objects.create_user(username=username, email=email, password=password)
            elif password:
                user.set_password(password)
            if staff:
                user.is_staff = True
            user.save()
            organization.members.add(user)

        made = "created" if created else "updated"
        where = f"{organization.slug} (new organization)" if org_created else organization.slug
        self.stdout.write(f"User {username} {made}, member of {where}. Sign in at /login/.")

    def _ask_password(self) -> str:
        if not sys.stdin.isatty():
            return ""
        first = getpass.getpass("Password: ")
        if first and getpass.getpass("Password (again): ") != first:
            raise CommandError("The two passwords differ.")
        return first
