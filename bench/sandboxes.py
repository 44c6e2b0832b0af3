"""What each sandbox kind adds to starting a process: N runs of `true` per kind against N bare
subprocesses of `true`, as ratios. Creating and destroying the sandbox (once per trial) is
timed apart from the runs. Kinds that cannot run here are named and skipped. Prints, never
asserts.

    .venv/bin/python bench/sandboxes.py [--runs 50]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proctor import variant  # noqa: E402
from runner.sandboxes import SandboxError, create_sandbox  # noqa: E402

KINDS = ("local", "bwrap", "docker")


def bare(runs: int) -> float:
    started = time.perf_counter()
    for _ in range(runs):
        subprocess.run(["true"], stdin=subprocess.DEVNULL, capture_output=True, check=True)
    return (time.perf_counter() - started) / runs


def sandboxed(kind: str, runs: int) -> tuple[float, float]:
    """Seconds to create + destroy the sandbox, and seconds per run of `true` in it."""
    started = time.perf_counter()
    box = create_sandbox(variant("command", sandbox=kind))
    try:
        box.run(["true"])  # warm up: first exec, page cache
        run_started = time.perf_counter()
        for _ in range(runs):
            result = box.run(["true"])
            if result.exit_code != 0:
                raise SystemExit(f"{kind}: `true` exited {result.exit_code}: {result.output}")
        per_run = (time.perf_counter() - run_started) / runs
    finally:
        box.destroy()
    lifecycle = time.perf_counter() - started - per_run * (runs + 1)
    return lifecycle, per_run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()

    bare(5)  # warm up
    baseline = bare(args.runs)
    print(f"{args.runs} runs of `true` per kind; bare subprocess: {baseline * 1000:.2f} ms per run")
    print(f"{'kind':<8} {'ms per run':>11} {'x bare':>8} {'create+destroy ms':>18}")
    for kind in KINDS:
        try:
            lifecycle, per_run = sandboxed(kind, args.runs)
        except SandboxError as exc:
            print(f"{kind:<8} skipped: {exc}")
            continue
        print(
            f"{kind:<8} {per_run * 1000:>11.2f} {per_run / baseline:>8.1f} {lifecycle * 1000:>18.0f}"
        )


if __name__ == "__main__":
    main()
