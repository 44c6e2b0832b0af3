"""proctor harness list: every harness with the capabilities it declares."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from runner.harnesses import CONVERSATION_RESUME, HARNESSES, PLAN_MODE


class Command(BaseCommand):
    help = "List harnesses and their capabilities."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["list"], help="what to do")

    def handle(self, *args, **options) -> None:
        width = max(len(name) for name in HARNESSES)
        for name, harness in sorted(HARNESSES.items()):
            caps = sorted(harness.capabilities)
            note = ""
            if name == "command":
                note = f"  ({CONVERSATION_RESUME} and {PLAN_MODE} when the profile's capabilities name them)"
            self.stdout.write(f"{name:<{width}}  {', '.join(caps) or '-'}{note}")
