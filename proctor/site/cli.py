"""The `proctor` command: Django's management commands under a shorter name.

`proctor eval`, `proctor serve`, `proctor worker`, `proctor harness list` and friends are
management commands of the project's apps, so `python manage.py eval` works the same.

`proctor`, `proctor help` and `proctor --help` list Proctor's own commands first, one line each,
and Django's maintenance commands (migrate, shell, ...) apart below them; `proctor help eval`
and `proctor eval --help` are Django's per-command help, unchanged (printed without setting
Django up, see ``print_eval_help``). `proctor eval` loads the apps that run trials and not the
web side's (``PROCTOR_WEB_APPS`` in proctor/site/settings.py).
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
    ("regrade", "Run the current checks on a batch's stored workspaces, with no agent run."),
    ("export", "Write a batch's trials as ATIF trajectory.json files for other tools."),
    ("harness list", "List the agent harnesses and what each can do."),
    ("sandbox list", "List the sandbox kinds, built in and from plug-ins, with their options."),
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


def asks_for_eval_help(args: list[str]) -> bool:
    """Whether ``args`` print `proctor eval`'s help: `eval ... --help` (or -h, before any
    ``--``), or `help eval`."""
    if args == ["help", "eval"]:
        return True
    if not args or args[0] != "eval":
        return False
    options = args[1 : args.index("--")] if "--" in args else args[1:]
    return "-h" in options or "--help" in options


def print_eval_help(args: list[str]) -> None:
    """`proctor eval --help` without django.setup(): loading the apps and the command's
    imports (models, harnesses) would be most of its time, and the help needs none of it.
    Parsed by the command's own parser, so what it prints (the help, or an error for a bad
    option before --help) is what Django's path prints. Returns when the arguments do not
    stop at the help after all; the caller then runs them the usual way."""
    # Here, not at the top: the other commands load the apps first.
    from runner.batches.eval_options import EvalOptions

    command = EvalOptions()
    if args[0] == "help":
        command.print_help("proctor", "eval")
        sys.exit(0)
    # As run_from_argv sets it: a bad option exits with argparse's message instead of raising.
    command._called_from_command_line = True  # type: ignore[attr-defined]  # unstubbed
    command.create_parser("proctor", "eval").parse_args(args[1:])


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proctor.site.settings")
    args = sys.argv[1:]
    if asks_for_eval_help(args):
        print_eval_help(args)
    if args[:1] == ["eval"]:
        # A batch needs neither the admin, nor the API, nor the dashboard (proctor/site/settings.py).
        os.environ.setdefault("PROCTOR_WEB_APPS", "false")
    from django.core.management import execute_from_command_line

    if args in HELP_ARGUMENTS:
        import django

        django.setup()
        sys.stdout.write(command_listing())
        return
    # Commands are named after their module (seed_demo_data); accept the dashed spelling too.
    if args and not args[0].startswith("-"):
        args[0] = args[0].replace("-", "_")
    from django.core.exceptions import ImproperlyConfigured
    from django.db import OperationalError

    try:
        execute_from_command_line(["proctor", *args])
    except ImproperlyConfigured as exc:
        # The environment's settings (DATABASE_URL, PROCTOR_HOME...): the message names the
        # setting and what is wrong with it; a traceback would add only Django's internals.
        sys.stderr.write(f"proctor: {exc}\n")
        sys.exit(2)
    except OperationalError:
        # Django's own commands (migrate, showmigrations, shell...) meet a database that does not
        # answer with a traceback: said in one line as Proctor's commands say it, when that is
        # what happened. An error of a database that answers is the command's own: raised.
        from django.core.management import CommandError

        # Here, not at the top: `proctor --help` and `proctor eval --help` load no apps.
        from runner.jobs.database import require_connection

        try:
            require_connection()
        except CommandError as refused:
            sys.stderr.write(f"proctor: {refused}\n")
            sys.exit(2)
        raise
    except KeyboardInterrupt as stop:
        # Ctrl-C where a command has nothing of its own to close (`proctor eval` closes its
        # batch itself): one line, not a traceback. `proctor eval` turns SIGTERM and SIGHUP into
        # an interrupt that carries its own line and exit status.
        from runner.batches.stop_signals import StopSignal, exit_status

        sys.stderr.write(f"{stop.summary if isinstance(stop, StopSignal) else 'Interrupted.'}\n")
        sys.exit(exit_status(stop))


if __name__ == "__main__":
    main()
