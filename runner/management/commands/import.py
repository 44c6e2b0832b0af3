"""proctor import promptfoo CONFIG [-o OUT.eval.py]: write a Proctor eval file from another
tool's config, and name everything that did not carry over."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from evals_app.loading import EVAL_SUFFIX
from runner.importers import ImportFailed, write_new_file
from runner.importers.promptfoo import translate_config
from runner.importers.promptfoo.files import load_config


class Command(BaseCommand):
    # Writes a file from another file: nothing in the project's set-up to check first.
    requires_system_checks: list[str] = []
    help = "Write a Proctor eval file from a promptfoo config (promptfooconfig.yaml)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("kind", choices=["promptfoo"], help="what the config is")
        parser.add_argument("config", help="the config file (YAML or JSON)")
        parser.add_argument(
            "-o",
            "--output",
            metavar=f"OUT{EVAL_SUFFIX}",
            help=f"where to write (default: beside the config, <name>{EVAL_SUFFIX})",
        )
        parser.add_argument(
            "--force", action="store_true", help="replace the output file when it exists"
        )

    def handle(self, *args, **options) -> None:
        config_path = Path(options["config"])
        output = (
            Path(options["output"])
            if options["output"]
            else config_path.with_name(config_path.stem + EVAL_SUFFIX)
        )
        try:
            if not output.name.endswith(EVAL_SUFFIX):
                raise ImportFailed(
                    f"{output} must end in {EVAL_SUFFIX}, so `proctor eval` finds it."
                )
            result = translate_config(
                load_config(config_path), config_path=config_path, output_path=output
            )
            write_new_file(
                output,
                result.source,
                replace=options["force"],
                hint="pass --force to replace it, or choose another name with -o",
            )
        except ImportFailed as exc:
            self.stderr.write(str(exc))
            sys.exit(2)
        suites = ", ".join(result.suites)
        self.stdout.write(
            f"Wrote {output}: suite{'s' if len(result.suites) > 1 else ''} {suites}, "
            f"{result.cases} case{'s' if result.cases != 1 else ''}."
        )
        if result.untranslated:
            self.stdout.write(
                f"Not translated ({len(result.untranslated)}; also listed at the top of the file):"
            )
            for item in result.untranslated:
                self.stdout.write(f"  - {item}")
        else:
            self.stdout.write("Everything translated.")
        self.stdout.write(f"Run it with: proctor eval {output}")
