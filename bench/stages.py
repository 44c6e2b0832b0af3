"""Where a no-op trial's CPU goes in Proctor's trial workers, stage by stage.

`bench/overhead.py` says how much a trial costs against the floor; on a shared machine its
figures move by a quarter within the hour, more than most single changes are worth. This bench
says where the cost is, with a steadier measure: the CPU time of the thread that runs the
trial (``time.thread_time``), summed per stage (claiming the trial, the conversation, grading,
the final record...). Each stage is one function of the trial's path, wrapped before the trial
workers are forked from this process, so the workers inherit the wrappers; a call of a stage
inside itself counts once. Each worker writes its sums to a file after every trial, read here
once the eval ends.

The figure per stage is marginal, like overhead.py's: the sums of a ``--large`` eval less
those of a ``--small`` one, per trial of the difference, so what a worker does once (its
imports, its first queries) falls out. Stages nest (the final record is inside the trial), so
the column does not add up. Three rows in parentheses measure around the trial rather than in its
thread: the worker's CPU over the trial (all its threads: the flusher, the heartbeat), the CPU of
the programs it started and waited for (the agent, the check), and the eval command's own
process, which forks the workers and waits for the batch; together they are what
`bench/overhead.py` counts. Trial folders and Proctor's home are made in the temp folder: set
``TMPDIR`` to a tmpfs (``/dev/shm``) to keep this disk's file costs out (docs/hot-path.md,
"Files made per trial").

Prints figures, never asserts them.

    .venv/bin/python bench/stages.py [--small 20] [--large 400] [-j 2]
"""

from __future__ import annotations

import argparse
import functools
import importlib
import io
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

from overhead import set_up_embedded  # the same no-op workload, the same set-up

# (module, class or None, function): the stages, outermost first.
STAGES = [
    ("runner.jobs.execution", None, "run_trial_by_id"),
    ("evals_app.models", "Trial", "claim"),
    ("runner.jobs.database_recorder", "DatabaseRecorder", "__init__"),
    ("runner.jobs.execution", None, "build_plan"),
    ("runner.trial.execute", None, "execute_trial"),
    ("runner.sandboxes", None, "create_sandbox"),
    ("runner.conversation.driver", None, "drive_conversation"),
    ("runner.sandboxes.processes", None, "run_process"),
    ("runner.grading.grade", None, "grade"),
    ("runner.workspace.diff", "WorkspaceSnapshot", "changes"),
    ("runner.core.reporting", "RedactingRecorder", "artifact"),
    ("runner.jobs.database_recorder", "DatabaseRecorder", "trial_finished"),
    ("evals_app.models", "Trial", "record_finish"),
    ("evals_app.hot_sql", None, "update_where"),
    ("evals_app.hot_sql", None, "insert_rows"),
    ("runner.jobs.event_rows", None, "insert_events"),
    ("runner.sandboxes.local", "LocalSandbox", "destroy"),
    ("runner.jobs.execution", None, "finish_batch_if_done"),
    # The machine's board of trials (the write audit's count of other processes' trials).
    ("runner.sandboxes.machine_trials", "MachineTrials", "trial_started"),
    ("runner.sandboxes.machine_trials", "MachineTrials", "trial_ended"),
    ("runner.sandboxes.machine_trials", "MachineTrials", "seen_between"),
]
# The stage that is a whole trial: each worker writes its sums when one ends.
OUTERMOST = STAGES[0][2]
# Over that same stage, measured around the trial's thread rather than in it: every thread of
# the worker, and the programs it started and waited for (the agent, the check).
WHOLE_WORKER = "(the worker, all its threads)"
WORKER_CHILDREN = "(the worker's programs)"
# And the eval command's own process, which forks the workers and waits for the batch.
EVAL_COMMAND = "(the eval command, all its threads)"


def children_cpu() -> float:
    """CPU seconds of this process's children that were waited for."""
    times = os.times()
    return times.children_user + times.children_system


class StageClock:
    """Sums of thread CPU seconds and calls per stage, in this process."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.sums: dict[str, list[float]] = {}
        self._inside = threading.local()

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            inside = self._inside.__dict__.setdefault("names", set())
            if name in inside:
                return function(*args, **kwargs)
            inside.add(name)
            outermost = name == OUTERMOST
            if outermost:
                process_before, children_before = time.process_time(), children_cpu()
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                inside.discard(name)
                self.add(name, time.thread_time() - started)
                if outermost:  # the whole worker too, and a worker's sums so far
                    self.add(WHOLE_WORKER, time.process_time() - process_before)
                    self.add(WORKER_CHILDREN, children_cpu() - children_before)
                    self.write()

        return timed

    def add(self, name: str, seconds: float) -> None:
        total = self.sums.setdefault(name, [0.0, 0])
        total[0] += seconds
        total[1] += 1

    def write(self) -> None:
        (self.folder / f"{os.getpid()}.json").write_text(json.dumps(self.sums))

    def install(self) -> None:
        """Wrap every stage where it is defined and wherever it was imported by name."""
        for module_name, owner_name, name in STAGES:
            module = importlib.import_module(module_name)
            owner = getattr(module, owner_name) if owner_name else module
            label = f"{owner_name}.{name}" if owner_name else name
            raw = owner.__dict__[name]
            if isinstance(raw, classmethod):
                setattr(owner, name, classmethod(self.wrap(label, raw.__func__)))
                continue
            timed = self.wrap(label, raw)
            setattr(owner, name, timed)
            if owner_name is None:
                for other in list(sys.modules.values()):
                    namespace = getattr(other, "__dict__", None)
                    if namespace is not None and namespace.get(name) is raw:
                        namespace[name] = timed

    def collected(self) -> dict[str, tuple[float, int]]:
        """The workers' sums, added up, and their files removed."""
        totals: dict[str, list[float]] = {}
        for path in self.folder.glob("*.json"):
            for name, (seconds, calls) in json.loads(path.read_text()).items():
                total = totals.setdefault(name, [0.0, 0])
                total[0] += seconds
                total[1] += calls
            path.unlink()
        self.sums.clear()  # this process's own, should it have run trials in a thread
        return {name: (seconds, int(calls)) for name, (seconds, calls) in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--small", type=int, default=20)
    parser.add_argument("--large", type=int, default=400)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="proctor-stages-"))
    set_up_embedded(folder)
    from django.core.management import call_command

    sums_folder = folder / "sums"
    sums_folder.mkdir()
    clock = StageClock(sums_folder)
    clock.install()

    def run(trials: int) -> dict[str, tuple[float, int]]:
        started = time.process_time()
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            call_command(
                "eval", str(folder / "noop.eval.py"), "--trials", str(trials), "-j", str(args.jobs)
            )
        sums = clock.collected()
        sums[EVAL_COMMAND] = (time.process_time() - started, trials)
        return sums

    run(2)  # warm up: the database, this process's imports
    small, large = run(args.small), run(args.large)
    trials = args.large - args.small
    print(
        f"no-op trials at -j {args.jobs}, {args.large} against {args.small}; CPU of the trial's "
        f"thread per trial, marginal; load {os.getloadavg()[0]:.2f}; temp folder "
        f"{tempfile.gettempdir()}"
    )
    print(f"{'stage':40} {'ms/trial':>9} {'calls/trial':>12}")
    rows = []
    for name, (seconds, calls) in large.items():
        before_s, before_calls = small.get(name, (0.0, 0))
        rows.append((name, (seconds - before_s) * 1000 / trials, (calls - before_calls) / trials))
    for name, ms, calls in sorted(rows, key=lambda row: -row[1]):
        print(f"{name:40} {ms:>9.3f} {calls:>12.2f}")
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
