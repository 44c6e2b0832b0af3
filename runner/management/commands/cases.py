"""proctor cases from-transcripts DIR --agent-model MODEL [-o OUT] [--suite ID] [--max-turns N]
[--seed-turns N]: recorded conversations become simulated-user cases in one eval file (a model
writes each caller's persona). The recording format is in docs/conversations.md."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from evals_app.loading import EVAL_SUFFIX
from proctor.rules import MAX_TURNS_RANGE, handle_problem
from runner.importers import ImportFailed, write_new_file
from runner.importers.handles import slugify
from runner.importers.transcripts import (
    DEFAULT_CEILING,
    cases_from_transcripts,
    transcript_files,
)
from runner.llm import KIND_UNCONFIGURED, UNCONFIGURED_MESSAGE, resolve_config


class Command(BaseCommand):
    # Writes a file from another file: nothing in the project's set-up to check first.
    requires_system_checks: list[str] = []
    help = "Write simulated-user cases from recorded conversations (a folder of *.json)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "action", choices=["from-transcripts"], help="where the cases come from"
        )
        parser.add_argument(
            "folder", metavar="DIR", help="folder of recorded conversations (*.json)"
        )
        parser.add_argument(
            "-o",
            "--output",
            metavar=f"OUT{EVAL_SUFFIX}",
            help=f"where to write (default: <suite id>{EVAL_SUFFIX} in the current folder)",
        )
        parser.add_argument(
            "--suite", metavar="ID", help="the suite's id (default: from the folder's name)"
        )
        parser.add_argument(
            "--agent-model",
            metavar="MODEL",
            help="the model of the agent under test, for the chat variant (required: the model "
            "that writes the personas is not the agent's)",
        )
        parser.add_argument(
            "--max-turns",
            metavar="N",
            type=int,
            default=DEFAULT_CEILING,
            help="the hard ceiling of each simulated caller's turns (default: "
            f"{DEFAULT_CEILING}); the turn target, twice the caller's turns up to 15, is a rubric",
        )
        parser.add_argument(
            "--seed-turns",
            metavar="N",
            type=int,
            default=0,
            help="start each case mid-conversation: the first N exchanges become initial_messages",
        )
        parser.add_argument(
            "--force", action="store_true", help="replace the output file when it exists"
        )

    def handle(self, *args, **options) -> None:
        try:
            self._write(options)
        except ImportFailed as exc:
            self.stderr.write(str(exc))
            sys.exit(2)

    def _progress(self, path: Path, skipped_because: str | None) -> None:
        if skipped_because:
            self.stderr.write(f"Skipped {path.name}: {skipped_because}.")
        else:
            self.stdout.write(f"  {path.name}")

    def _write(self, options: dict) -> None:
        folder = Path(options["folder"])
        if not folder.is_dir():
            raise ImportFailed(f"{folder} is not a folder of recorded conversations.")
        suite_id = options["suite"] or slugify(folder.resolve().name, fallback="conversations")
        if problem := handle_problem("--suite", suite_id):
            raise ImportFailed(f"{problem}.")
        output = Path(options["output"] or f"{suite_id}{EVAL_SUFFIX}")
        if not output.name.endswith(EVAL_SUFFIX):
            raise ImportFailed(f"{output} must end in {EVAL_SUFFIX}, so `proctor eval` finds it.")
        if output.exists() and not options["force"]:
            raise ImportFailed(
                f"{output} already exists; pass --force to replace it, or choose another name with -o."
            )
        paths = transcript_files(folder)
        if not paths:
            raise ImportFailed(f"{folder} holds no *.json recorded conversations.")
        agent_model = (options["agent_model"] or "").strip()
        if not agent_model:
            raise ImportFailed(
                "Name the model of the agent under test with --agent-model MODEL; the model "
                "that writes the personas is not the agent's."
            )
        low, high = MAX_TURNS_RANGE
        if not low <= options["max_turns"] <= high:
            raise ImportFailed(f"--max-turns must be {low} to {high}, not {options['max_turns']}.")
        if options["seed_turns"] < 0:
            raise ImportFailed(f"--seed-turns must be 0 or more, not {options['seed_turns']}.")
        config = resolve_config()
        if config.kind == KIND_UNCONFIGURED:
            raise ImportFailed(f"A model writes each caller's persona, but {UNCONFIGURED_MESSAGE}.")
        self.stdout.write(
            f"Writing personas for {len(paths)} recorded conversation{'s' if len(paths) != 1 else ''} "
            f"with {config.describe()}…"
        )
        result = cases_from_transcripts(
            paths,
            suite_id=suite_id,
            config=config,
            agent_model=agent_model,
            ceiling=options["max_turns"],
            seed_turns=options["seed_turns"],
            on_progress=self._progress,
        )
        if not result.cases:
            self.stderr.write("No case written: every recorded conversation was skipped.")
            sys.exit(1)
        write_new_file(output, result.source, replace=options["force"])
        self.stdout.write(
            f"Wrote {output}: suite {suite_id}, {len(result.cases)} case"
            f"{'s' if len(result.cases) != 1 else ''} ({', '.join(result.cases)})."
        )
        self.stdout.write(
            "Point its chat variant at the agent under test, then run: proctor eval " + str(output)
        )
