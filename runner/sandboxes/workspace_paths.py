"""Workspace paths as a trial's record holds them: relative to the workspace (``calc.py``).

An agent reports the files it changed as it sees them, mostly absolute: under a sandbox that
is the trial's own temp folder (``/tmp/proctor-trial-…/workspace/calc.py``), a different one
for every trial, which tells a reader nothing and makes two trials' changes look different. The
session stores each reported path relative to the workspace as it arrives
(:func:`relative_to_workspace`), as the workspace diff always named them; a path outside the
workspace (a file in the agent's home) stays absolute, as the place it names.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable


def relative_to_workspace(path: str, workspaces: Iterable[str]) -> str:
    """``path`` relative to the first of ``workspaces`` (absolute) that holds it, and a relative
    path tidied (``./src//calc.py`` -> ``src/calc.py``); a path outside them all is kept."""
    if not path.startswith("/"):
        return posixpath.normpath(path) if path else path
    tidy = posixpath.normpath(path)
    for workspace in workspaces:
        root = posixpath.normpath(workspace)
        if tidy.startswith(root + "/"):
            return tidy[len(root) + 1 :]
    return path
