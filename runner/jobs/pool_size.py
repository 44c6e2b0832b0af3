"""How many trials a process runs at once unless told: one per CPU.

A module of its own so that `proctor eval --help` and `proctor worker --help` read the default
without importing the pool (``runner.jobs.dispatch`` and the forked workers it starts).
"""

from __future__ import annotations

import os


def default_concurrency() -> int:
    return os.cpu_count() or 2
