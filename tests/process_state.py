"""Whether a process the test started (or its agent started) still runs.

A zombie still answers ``kill(pid, 0)`` and keeps its /proc entry until it is reaped, and it
can be reaped between any two looks, so one read of /proc/<pid>/stat decides, and a missing
entry counts as gone.
"""

from __future__ import annotations

from pathlib import Path


def running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state follows the command name, which is in parentheses and may hold spaces.
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
