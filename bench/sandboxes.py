"""A trial's sandbox cost against the bare equivalent, per kind, measured in the same run.

A trial here is what the runner does around a no-op trial: create the sandbox, run the agent
(a shell printing two protocol lines), run the check (`true`), destroy the sandbox. Its bare
equivalent, what a user would type to get the same isolation without Proctor:

- local: two plain subprocesses (agent, check).
- bwrap: two `bwrap` processes with the very argv Proctor builds (the same binds, namespaces
  and dropped capabilities), one per command, into folders made beforehand.
- docker: `docker run --rm` of the agent and `docker run --rm` of the check, from the same
  image with the network off (the goal's "bare docker run of the same command"); and, the
  strictest floor, ONE `docker run --rm` running both commands in one shell.

Each kind runs its trials and its bare trials interleaved (bare, trial, bare, trial...), so a
load change on the machine hits both; medians are shown. What a trial leaves to background
threads (its folders' deletion, its container's removal: off the trial's path, like the
runner's) is waited for after each timed sample, outside both timings, so it slows neither the
bare run that follows nor the next trial. Kinds that cannot run here are named and skipped.
Prints, never asserts; ratios last.

    .venv/bin/python bench/sandboxes.py [--trials 15] [--kinds local,bwrap,docker]
"""

from __future__ import annotations

import argparse
import atexit
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proctor import variant  # noqa: E402
from runner.sandboxes import SandboxError, container_removal, create_sandbox, trial_folders  # noqa: E402
from runner.sandboxes.bwrap import BwrapSandbox  # noqa: E402
from runner.sandboxes.docker import DEFAULT_IMAGE  # noqa: E402

AGENT = """echo '{"_tag":"Started","sessionId":"noop","model":"none"}'; echo '{"_tag":"Finished","reason":"done"}'"""
AGENT_ARGV = ["sh", "-c", AGENT]
CHECK_ARGV = ["true"]
GOALS = {"bwrap": 1.2, "docker": 1.1}


def _quiet(argv: list[str]) -> None:
    subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=True)


def proctor_trial(kind: str) -> None:
    box = create_sandbox(variant("command", sandbox=kind))
    try:
        for argv in (AGENT_ARGV, CHECK_ARGV):
            result = box.run(argv)
            if result.exit_code != 0:
                raise SystemExit(f"{kind}: {argv[0]} exited {result.exit_code}: {result.output}")
    finally:
        box.destroy()


def _each(argvs: list[list[str]]) -> Callable[[], None]:
    def run_all() -> None:
        for argv in argvs:
            _quiet(argv)

    return run_all


def bare_trials(kind: str) -> dict[str, Callable[[], None]]:
    """The bare equivalents of one trial of ``kind`` (see the module docstring)."""
    if kind == "local":
        return {"two processes": _each([AGENT_ARGV, CHECK_ARGV])}
    if kind == "bwrap":
        template = BwrapSandbox.for_variant(variant("command", sandbox="bwrap"))
        atexit.register(template.destroy)  # its folders are the bare runs' binds
        argvs = [template._bwrap_argv(a, template.workspace) for a in (AGENT_ARGV, CHECK_ARGV)]
        return {"two bwrap": _each(argvs)}
    docker_run = ["docker", "run", "--rm", "--network", "none", DEFAULT_IMAGE]
    return {
        "two docker run": _each([[*docker_run, *AGENT_ARGV], [*docker_run, *CHECK_ARGV]]),
        "one docker run": _each([[*docker_run, "sh", "-c", f"{AGENT}; true"]]),
    }


def _seconds(work: Callable[[], None]) -> float:
    started = time.perf_counter()
    work()
    seconds = time.perf_counter() - started
    container_removal.wait_for_removals()
    trial_folders.wait_for_removals()
    return seconds


def measure(kind: str, trials: int) -> tuple[float, dict[str, float]]:
    """Median seconds of a Proctor trial and of each bare equivalent."""
    bares = bare_trials(kind)
    proctor_trial(kind)  # warm up: imports, the engine's image cache
    for work in bares.values():
        work()
    ours: list[float] = []
    theirs: dict[str, list[float]] = {name: [] for name in bares}
    for _ in range(trials):
        for name, work in bares.items():
            theirs[name].append(_seconds(work))
        ours.append(_seconds(lambda: proctor_trial(kind)))
    return statistics.median(ours), {n: statistics.median(t) for n, t in theirs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=15)
    parser.add_argument(
        "--kinds", default="local,bwrap,docker", help="the kinds to measure, comma-separated"
    )
    args = parser.parse_args()

    print(f"{args.trials} no-op trials per kind (agent + check), medians")
    print(f"{'kind':<8} {'proctor ms':>11} {'bare':<16} {'bare ms':>9} {'ratio':>7}")
    ratios: list[str] = []
    for kind in args.kinds.split(","):
        try:
            ours, theirs = measure(kind, args.trials)
        except SandboxError as exc:
            print(f"{kind:<8} skipped: {exc}")
            continue
        for name, seconds in theirs.items():
            ratio = ours / seconds
            print(f"{kind:<8} {ours * 1000:>11.1f} {name:<16} {seconds * 1000:>9.1f} {ratio:>7.2f}")
            goal = f" (goal <= {GOALS[kind]})" if kind in GOALS else ""
            ratios.append(f"  {kind:<7} vs {name:<16} {ratio:5.2f}{goal}")
    print("ratios, a Proctor trial over its bare equivalent:")
    print("\n".join(ratios))


if __name__ == "__main__":
    main()
