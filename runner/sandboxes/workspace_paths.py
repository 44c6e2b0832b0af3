"""A recorded file path as the pages show it: relative to the trial's workspace (``calc.py``).

An agent reports the files it changed as it sees them, mostly absolute, and the record keeps
them so (validators read them as written). Under a sandbox that path runs through the trial's
own temp folder (``/tmp/proctor-trial-…/workspace/calc.py``), a different one for every trial,
which tells a reader nothing and makes two trials' changes look different: the pages and the
API's events show such a path relative to the workspace (:func:`shown_path`).
"""

from __future__ import annotations

import re

# A trial's folder is made as "proctor-trial-<owner>-<random>" (runner.sandboxes.trial_folders,
# named by leftovers.owned_prefix; "proctor-trial-<random>" before owners were named) and holds
# the "workspace" folder; every kind of sandbox shows the agent the workspace at that path.
_IN_A_TRIALS_WORKSPACE = re.compile(r"\A/(?:[^/]+/)*?proctor-trial-[^/]+/workspace/(?=[^/])")


def shown_path(path: str) -> str:
    """``path`` relative when it lies in a trial's workspace; any other path (a plan in the
    agent's home) unchanged."""
    return _IN_A_TRIALS_WORKSPACE.sub("", path, count=1)
