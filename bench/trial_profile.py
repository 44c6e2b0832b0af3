"""Where a no-op trial's thread spends its CPU, function by function: cProfile in the trial workers.

`bench/stages.py` sums the thread's CPU per stage; this bench goes one level down, for when a
stage holds more than it should: each worker profiles the thread that runs the trial
(``run_trial_by_id``), with the thread's CPU clock as the profiler's timer, so time the thread
spends waiting (for the agent, the check, a lock) is not counted. The workers are forked from
this process after the wrapper is in place, as in stages.py, and each writes its profile after
every trial; the profiles are added up here once the eval ends.

Printed per trial: the functions with the most CPU of their own (the interpreter's own built-ins,
system calls and SQLite's C code among them), then Proctor's own functions by the CPU under them.
cProfile slows Python calls by about half, so read the figures as shares, not as costs; the
warm-up eval (its first queries and imports) is left out. Trial folders and Proctor's home are in
the temp folder, as in stages.py.

Prints figures, never asserts them.

    .venv/bin/python bench/trial_profile.py [--trials 300] [-j 2] [--top 30]
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from overhead import ROOT, proctor, set_up_embedded  # the same workload and set-up

PROJECT_FOLDERS = ("runner", "evals_app", "proctor")


class TrialProfiler:
    """One profile of the trial thread's CPU per worker process, written after each trial."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.enabled = False
        self._profile: cProfile.Profile | None = None
        self._pid = 0

    def wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def profiled(*args: Any, **kwargs: Any) -> Any:
            if not self.enabled:
                return function(*args, **kwargs)
            if self._pid != os.getpid():  # a worker forked with the parent's (empty) profile
                self._profile, self._pid = cProfile.Profile(time.thread_time), os.getpid()
            assert self._profile is not None
            self._profile.enable()
            try:
                return function(*args, **kwargs)
            finally:
                self._profile.disable()
                self._profile.dump_stats(str(self.folder / f"{os.getpid()}.prof"))

        return profiled

    def install(self) -> None:
        """Wrap run_trial_by_id where it is defined and wherever it was imported by name."""
        from runner.jobs import execution

        raw = execution.run_trial_by_id
        profiled = self.wrap(raw)
        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", None)
            if namespace is not None and namespace.get("run_trial_by_id") is raw:
                namespace["run_trial_by_id"] = profiled

    def collected(self) -> pstats.Stats:
        paths = sorted(str(path) for path in self.folder.glob("*.prof"))
        if not paths:
            raise SystemExit("no trial was profiled")
        return pstats.Stats(*paths)


def _where(filename: str, line: int, name: str) -> str:
    """A function's place, relative to the project or to its library."""
    if filename.startswith(str(ROOT)):
        filename = filename[len(str(ROOT)) + 1 :]
    elif "site-packages/" in filename:
        filename = filename.split("site-packages/", 1)[1]
    elif "/lib/python3" in filename:
        filename = filename.split("/lib/python3", 1)[1].split("/", 1)[-1]
    return f"{filename}:{line}({name})" if line else name


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="proctor-profile-"))
    set_up_embedded(folder)
    run = proctor(folder)
    profiler = TrialProfiler(folder / "profiles")
    profiler.folder.mkdir()
    profiler.install()
    run(2, args.jobs)  # warm up: the database, this process's imports
    profiler.enabled = True
    run(args.trials, args.jobs)
    stats: Any = profiler.collected().stats  # {(file, line, name): (calls, _, own, under, _)}
    per_trial = 1e6 / args.trials
    total = sum(own for _, _, own, _, _ in stats.values()) * per_trial
    print(
        f"no-op trials at -j {args.jobs}, {args.trials} profiled; the trial thread's CPU under "
        f"cProfile {total:.0f} us a trial; load {os.getloadavg()[0]:.2f}; temp folder "
        f"{tempfile.gettempdir()}"
    )
    print(f"\n{'own us/trial':>12} {'calls/trial':>11}  function (the most CPU of its own)")
    for key, (_, calls, own, _, _) in sorted(stats.items(), key=lambda item: -item[1][2])[
        : args.top
    ]:
        print(f"{own * per_trial:>12.1f} {calls / args.trials:>11.1f}  {_where(*key)}")
    ours = {
        key: value
        for key, value in stats.items()
        if key[0].startswith(tuple(str(ROOT / name) + "/" for name in PROJECT_FOLDERS))
    }
    print(
        f"\n{'under us/trial':>14} {'calls/trial':>11}  Proctor's function (the most CPU under it)"
    )
    for key, (_, calls, _, under, _) in sorted(ours.items(), key=lambda item: -item[1][3])[
        : args.top
    ]:
        print(f"{under * per_trial:>14.1f} {calls / args.trials:>11.1f}  {_where(*key)}")
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
