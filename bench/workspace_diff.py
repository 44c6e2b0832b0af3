"""What comparing the workspace costs, per turn and per trial, against walking it.

A synthetic workspace (``--files`` Python files of ~1 KB in folders of 40) is snapshotted once,
then one file changes and the workspace is compared again, as the session does after each
turn, and diffed, as the trial does at its end. The baseline is one ``os.walk`` with an
``lstat`` of every file: the least any change detection must do. Prints ratios against it,
measured in the same process, never asserts.

    .venv/bin/python bench/workspace_diff.py [--files 4000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from runner.workspace.diff import WorkspaceSnapshot


def best_of(rounds: int, action) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def walk_and_stat(root: Path) -> None:
    for folder, _dirs, files in os.walk(root):
        for name in files:
            os.lstat(os.path.join(folder, name))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="proctor-bench-diff-") as scratch:
        root = Path(scratch)
        for index in range(args.files):
            folder = root / f"pkg{index // 40}"
            folder.mkdir(exist_ok=True)
            (folder / f"mod{index}.py").write_text("value = 1\n" * 100)
        # Older than the racy window, as a workspace prepared before the agent starts.
        time.sleep(2.5)
        baseline = best_of(args.rounds, lambda: walk_and_stat(root))
        take = best_of(args.rounds, lambda: WorkspaceSnapshot.take(root))
        snapshot = WorkspaceSnapshot.take(root)
        (root / "pkg0" / "mod0.py").write_text("value = 2\n")
        turn = best_of(args.rounds, lambda: snapshot.changes(root))
        trial = best_of(args.rounds, lambda: snapshot.diff(root))
    print(f"{args.files} files, baseline os.walk + lstat: {baseline * 1000:.1f} ms")
    for label, seconds in (
        ("first snapshot (reads every file)", take),
        ("per-turn compare (one file changed)", turn),
        ("whole-trial diff (one file changed)", trial),
    ):
        print(f"  {label:<38} {seconds * 1000:8.1f} ms  {seconds / baseline:5.2f}x baseline")


if __name__ == "__main__":
    main()
