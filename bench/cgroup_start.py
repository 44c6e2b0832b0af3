"""What starting a run in its own cgroup costs, the two ways Proctor does it, against a bare
subprocess: a program created in its cgroup (clone3, CLONE_INTO_CGROUP) and one that a shell
moves in before it execs (the fallback), each through ``run_process`` as a trial's steps run.

The three are interleaved run by run (bare, clone3, shell, ...), so a change of load on the
machine hits all of them; medians and means are shown. ``--busy N`` keeps N processes spinning
on the CPU meanwhile, as other trials would: moving a process into a cgroup waits for an RCU
grace period, which a busy machine makes long. Prints, never asserts; ratios last.

    .venv/bin/python bench/cgroup_start.py [--runs 200] [--busy 2]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner.sandboxes.containment import containment  # noqa: E402
from runner.sandboxes.processes import run_process  # noqa: E402

PROGRAM = ["/bin/true"]
ENV = {"PATH": "/usr/bin:/bin"}


def bare() -> None:
    subprocess.run(PROGRAM, env=ENV, stdin=subprocess.DEVNULL, capture_output=True)


def through_run_process() -> None:
    run_process(PROGRAM, env=ENV, timeout_s=30)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--busy", type=int, default=0, help="processes spinning meanwhile")
    args = parser.parse_args()

    contained = containment()
    if contained.base is None:
        sys.exit("no writable cgroup2 mount here: runs are contained by their process group")
    can_clone = contained.starts_inside
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)
    ]
    samples: dict[str, list[float]] = {"bare": [], "clone3": [], "shell": []}
    try:
        for _ in range(args.runs):
            for way in samples:
                if way == "clone3" and not can_clone:
                    continue
                contained.starts_inside = way == "clone3"
                started = time.perf_counter()
                bare() if way == "bare" else through_run_process()
                samples[way].append((time.perf_counter() - started) * 1000)
    finally:
        contained.starts_inside = can_clone
        for spinner in spinners:
            spinner.kill()
            spinner.wait()

    print(f"{args.runs} runs of {PROGRAM[0]} each way, {args.busy} processes spinning meanwhile")
    print(f"{'way':8} {'median ms':>10} {'mean ms':>9}")
    for way, times in samples.items():
        if times:
            print(f"{way:8} {statistics.median(times):>10.2f} {statistics.mean(times):>9.2f}")
    if not can_clone:
        print("clone3: not here (the C extension was not built, or the kernel refused)")
    base = statistics.median(samples["bare"])
    print("ratios (median over bare):")
    for way in ("clone3", "shell"):
        if samples[way]:
            print(f"  {way:8} {statistics.median(samples[way]) / base:.2f}x")


if __name__ == "__main__":
    main()
