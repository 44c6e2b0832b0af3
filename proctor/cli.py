"""The `proctor` command: Django's management commands under a shorter name.

`proctor eval`, `proctor serve`, `proctor worker`, `proctor harness list` and friends are
management commands of the project's apps, so `python manage.py eval` works the same.

`proctor`, `proctor help` and `proctor --help` list Proctor's own commands first, one line each,
and Django's maintenance commands (migrate, shell, ...) apart below them; `proctor help eval`
and `proctor eval --help` are Django's per-command help, unchanged.
"""

from __future__ import annotations

import os
import sys
import textwrap

# Proctor's face, in the order a new user meets it. The summaries are written here rather than
# read from each command's ``help`` so the listing stays one line per command and needs no
# import of every command module just to print it.
PROCTOR_COMMANDS: list[tuple[str, str]] = [
    ("eval", "Run *.eval.py / *.eval.json files as one batch and report the results."),
    ("serve", "Serve the dashboard (and the API) on 127.0.0.1:8000."),
    ("worker", "Run queued trials from Redis (the server mode)."),
    ("compare", "Compare two batches case by case: what got better, what got worse."),
    ("harness list", "List the agent harnesses and what each can do."),
    ("import", "Write a Proctor eval file from a promptfoo config."),
    ("cases", "Write simulated-user cases from recorded conversations."),
    ("init", "Write a starter eval file to edit."),
    ("createuser", "Create a dashboard user in an organization (--staff: admin too)."),
    ("createtoken", "Print a user's API token for --server and the API."),
    ("seed-demo-data", "Fill the database with made-up results to look around the dashboard."),
]

# Management commands from Proctor's apps that the list above leaves to the second group.
PROCTOR_APPS = ("runner", "dashboard", "evals_app")
HELP_ARGUMENTS: tuple[list[str], ...] = ([], ["help"], ["--help"], ["-h"])


def command_listing() -> str:
    """The text of `proctor --help`: Proctor's commands, then the rest by name."""
    from django.core.management import get_commands

    ours = {name.split()[0].replace("-", "_") for name, _ in PROCTOR_COMMANDS}
    width = max(len(name) for name, _ in PROCTOR_COMMANDS) + 2
    lines = [
        "Usage: proctor <command> [options]",
        "",
        "Proctor's commands:",
        *(f"  {name:<{width}}{summary}" for name, summary in PROCTOR_COMMANDS),
    ]
    commands = get_commands()  # name -> app label (or 'django.core')
    extra = sorted(
        name
        for name, app in commands.items()
        if name not in ours and app.split(".")[-1] in PROCTOR_APPS
    )
    if extra:
        lines += ["", "More of Proctor:"]
        lines += [
            f"  {name.replace('_', '-'):<{max(width, len(name) + 2)}}{_summary(commands[name], name)}"
            for name in extra
        ]
    maintenance = sorted(
        name
        for name, app in commands.items()
        if name not in ours and app.split(".")[-1] not in PROCTOR_APPS
    )
    lines += [
        "",
        "Django's maintenance commands (database, static files, shell):",
        *_columns(maintenance),
        "",
        "Run 'proctor <command> --help' for a command's options.",
    ]
    return "\n".join(lines) + "\n"


def _summary(app: str, name: str) -> str:
    """The first sentence of a command's own help (imports the command's module)."""
    from django.core.management import load_command_class

    text = str(load_command_class(app, name).help or "").strip()
    return text.split(". ")[0].rstrip(".") + "." if text else ""


def _columns(names: list[str]) -> list[str]:
    return textwrap.wrap(", ".join(names), width=78, initial_indent="  ", subsequent_indent="  ")


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proctor.settings")
    from django.core.management import execute_from_command_line

    args = sys.argv[1:]
    if args in HELP_ARGUMENTS:
        import django

        django.setup()
        sys.stdout.write(command_listing())
        return
    # Commands are named after their module (seed_demo_data); accept the dashed spelling too.
    if args and not args[0].startswith("-"):
        args[0] = args[0].replace("-", "_")
    execute_from_command_line(["proctor", *args])


if __name__ == "__main__":
    main()
