"""Paths into the eval's project, recorded so they travel with its bundle.

An eval file finds its agent and its check scripts from its own location
(``f"bash {Path(__file__).parent / 'check.sh'}"``), so the values it builds hold the absolute
path of the project folder on the machine that loaded it. Recorded as written, that path would
make the case version depend on where the folder sits, and a worker elsewhere (or after the
folder moved) would run a file that is not there. So a recorded value names the project folder
by a token, ``${PROCTOR_PROJECT}``, and a worker puts back the folder that holds the project's
bundle when the trial runs.

Pure: text in, text out, plus ``is_file`` / ``is_dir`` looks on the submitting machine.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

PROJECT_TOKEN = "${PROCTOR_PROJECT}"

# What may stand right before or after a path in a command line or a value: anything that is
# not part of a file name. Before it, "/" too (``file:///home/...``).
_NAME_CHARS = r"A-Za-z0-9._\-~+@%"
# An absolute path as written in a command line: up to whitespace, a quote or a shell operator.
_ABSOLUTE_PATH = re.compile(rf"(?<![{_NAME_CHARS}/])/[^\s'\"`;|&<>(){{}}$*?,=:]+")
# Where a program, a library or the system lives: naming them is not reading the user's files.
_SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/dev", "/proc", "/sys")


# The rest of a path after the project folder, as far as it runs in a command line.
_PATH_REST = r"(/[^\s'\"`;|&<>(){}$*?,=:]*)?"
# Folders of the machine's environment that may sit inside a project (a virtual environment,
# installed packages): never bundled, so a path into them stays as written.
ENVIRONMENT_FOLDERS = frozenset({".venv", "venv", "env", "node_modules", ".tox", ".nox"})


def recorded(value: Any, root: Path) -> Any:
    """``value`` (text, or JSON holding text) with the project folder named by the token,
    except where a path leads into the machine's environment (the project's own virtual
    environment: ``sys.executable``)."""
    if root == Path(root.anchor):
        return value  # a project at the file system's root: every path would be inside it
    pattern = re.compile(
        rf"(?<![{_NAME_CHARS}]){re.escape(str(root))}(?=$|/|[^{_NAME_CHARS}]){_PATH_REST}"
    )

    def name(match: re.Match[str]) -> str:
        rest = match.group(1) or ""
        if _in_environment(root, rest):
            return match.group(0)
        return PROJECT_TOKEN + rest

    return map_text(value, lambda text: pattern.sub(name, text))


def _in_environment(root: Path, rest: str) -> bool:
    folder = root
    for part in [p for p in rest.split("/") if p][:-1]:
        folder = folder / part
        if part in ENVIRONMENT_FOLDERS or (folder / "pyvenv.cfg").is_file():
            return True
    return False


def resolved(value: Any, root: Path | str) -> Any:
    """``value`` with the token replaced by ``root``: the folder holding the project here."""
    folder = str(root)
    return map_text(value, lambda text: text.replace(PROJECT_TOKEN, folder))


def map_text(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` with ``change`` applied to every text in it (dict keys left alone)."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {key: map_text(item, change) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [map_text(item, change) for item in value]
    return value


def texts(value: Any) -> Iterator[str]:
    """Every text in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from texts(item)


def project_files_named(value: Any) -> set[str]:
    """The paths inside the project (relative to its root) that a recorded value names through
    the token, as far as a path runs in a command line."""
    found: set[str] = set()
    token = re.escape(PROJECT_TOKEN)
    for text in texts(value):
        for match in re.finditer(token + _PATH_REST, text):
            found.add((match.group(1) or "/").strip("/"))
    return found


def outside_paths(value: Any, root: Path) -> list[str]:
    """Absolute paths a recorded value names that exist on this machine, lie outside the
    project and outside the system's own folders: a worker on another machine needs them at
    the same place."""
    found: list[str] = []
    home = str(root)
    for text in texts(value):
        for match in _ABSOLUTE_PATH.finditer(text):
            path = match.group(0).rstrip(".")
            if path == home or path.startswith(home + "/"):
                continue
            if any(path == s or path.startswith(s + "/") for s in _SYSTEM_FOLDERS):
                continue
            if path not in found and os.path.exists(path):
                found.append(path)
    return found
