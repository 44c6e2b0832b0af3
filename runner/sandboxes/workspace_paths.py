"""Workspace paths as a trial's record holds them: relative to the workspace (``calc.py``).

An agent reports the files it changed as it sees them, mostly absolute: under a sandbox that
is the trial's own temp folder (``/tmp/proctor-trial-…/workspace/calc.py``), a different one
for every trial, which tells a reader nothing and makes two trials' changes look different. The
session stores each reported path relative to the workspace as it arrives
(:func:`relative_to_workspace`), as the workspace diff always named them; a path outside the
workspace (a file in the agent's home) stays absolute, as the place it names.

Trials recorded before that hold the absolute paths: :func:`shown_path` makes them relative
where they are read, recognising the workspace of a trial's folder by its name.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

# A trial's folder is made as "proctor-trial-<owner>-<random>" (runner.sandboxes.trial_folders,
# named by leftovers.owned_prefix; "proctor-trial-<random>" before owners were named) and holds
# the "workspace" folder; every kind of sandbox shows the agent the workspace at that path.
_IN_A_TRIALS_WORKSPACE = re.compile(r"\A/(?:[^/]+/)*?proctor-trial-[^/]+/workspace/(?=[^/])")


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


def shown_path(path: str) -> str:
    """A recorded path as the pages show it: relative when it lies in a trial's workspace, as
    recorded before paths were stored relative; any other path unchanged."""
    return _IN_A_TRIALS_WORKSPACE.sub("", path, count=1)
