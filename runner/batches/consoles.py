"""The terminal consoles of Proctor's commands.

What they print is mostly the user's own words (suite, case and variant names, models, file
paths, problems), so Rich shows it as written: no highlighting of numbers and paths, no emoji
codes (Rich would turn the ``:m:`` of a variant ``chat:m:5`` into an emoji), and soft wrapping
so a problem stays one greppable line even when stderr is a pipe. Markup stays on for the
report's own colours; user text in it goes through ``rich.markup.escape``.
"""

from __future__ import annotations

from rich.console import Console


def command_consoles() -> tuple[Console, Console]:
    """(stdout, stderr) consoles for a command's report and its problems."""
    return (
        Console(highlight=False, soft_wrap=True, emoji=False),
        Console(stderr=True, highlight=False, soft_wrap=True, emoji=False),
    )
