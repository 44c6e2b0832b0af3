"""proctor init [--multi-turn] [-o DIR]: write a starter eval file to begin from."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from evals_app.loading import EVAL_SUFFIX
from runner.importers import ImportFailed, write_new_file
from runner.importers.first_eval import FIRST_EVAL, FIRST_EVAL_FILE
from runner.importers.starters import STARTER_FILE, starter_source
from runner.llm import resolve_config

PLACEHOLDER_MODEL = "gpt-4.1"


class Command(BaseCommand):
    # Writes a file from another file: nothing in the project's set-up to check first.
    requires_system_checks: list[str] = []
    help = (
        "Write a starter eval file: a suite that runs as written, with a stand-in agent "
        "(--multi-turn: simulated callers against a chat agent)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--multi-turn",
            action="store_true",
            help="four simulated-user scenarios with weighted assertions",
        )
        parser.add_argument(
            "-o",
            "--output",
            metavar="DIR",
            default=".",
            help=f"folder to write {FIRST_EVAL_FILE} (or {STARTER_FILE}) into (default: the "
            f"current folder), or a file name ending in {EVAL_SUFFIX}",
        )

    def handle(self, *args, **options) -> None:
        multi_turn = options["multi_turn"]
        target = Path(options["output"])
        name = STARTER_FILE if multi_turn else FIRST_EVAL_FILE
        path = target if target.name.endswith(EVAL_SUFFIX) else target / name
        if multi_turn:
            text = starter_source(resolve_config().model or PLACEHOLDER_MODEL)
            what = "four simulated callers against a chat agent with a booking tool."
        else:
            text = FIRST_EVAL
            what = "two cases and a stand-in agent; it runs as written, then put your agent in."
        try:
            write_new_file(path, text, hint="remove it first or write elsewhere with -o")
        except ImportFailed as exc:
            self.stderr.write(str(exc))
            sys.exit(2)
        self.stdout.write(f"Wrote {path}: {what}")
        self.stdout.write(f"Run it with: proctor eval {path}")
