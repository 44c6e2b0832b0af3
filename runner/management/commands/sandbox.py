"""proctor sandbox list: every sandbox kind installed, where it comes from, the options it
reads and the limits it applies; plug-ins that failed to load, one line each."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from runner.sandboxes import BUILT_IN_KINDS, SANDBOX_KINDS
from runner.sandboxes.base import LIMIT_OPTIONS


class Command(BaseCommand):
    help = "List sandbox kinds: built in and installed by other packages."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["list"], help="what to do")

    def handle(self, *args, **options) -> None:
        width = max(len(name) for name in [*SANDBOX_KINDS, *SANDBOX_KINDS.broken])
        for name, kind in sorted(SANDBOX_KINDS.items()):
            origin = "built in" if name in BUILT_IN_KINDS else f"plug-in {kind.__module__}"
            taken = ", ".join(sorted(kind.option_names)) or "-"
            if kind.limits_refused_because:
                limits = "no limits"
            else:
                limits = "limits " + ", ".join(LIMIT_OPTIONS)
            where = "" if kind.reaches_host_mocks else "; runs elsewhere, no mocks"
            self.stdout.write(f"{name:<{width}}  {origin}; options: {taken}; {limits}{where}")
        for name, problem in sorted(SANDBOX_KINDS.broken.items()):
            self.stdout.write(f"{name:<{width}}  not loaded: {problem}")
