"""Peak resident memory of a real `proctor eval` process over N no-op trials (default 1,000),
including the end of the run (the report it prints and benchmark.json).

The process is sampled every 50 ms from /proc (VmRSS, and VmHWM, the kernel's own high-water
mark, on the last sample); the finished-trial count is read from its SQLite database at each
sample, so the baseline is the same process's RSS once 10 trials had finished. At -j 2 the
trials run in two worker processes forked from it (runner/jobs/trial_processes.py), which share
most of their pages with it: the whole is measured as the sum of the processes' PSS
(proportional set size: each shared page counted once, split among its sharers), with their
summed RSS beside it (shared pages counted in every process). The agents' processes are not
counted: they are the workload, not the harness. Prints the ratios last.

    .venv/bin/python bench/memory.py [--trials 1000]
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from noop_eval import proctor_command, proctor_env, write_noop_eval  # noqa: E402

GOAL_MB = 150


def _status_kb(pid: int) -> dict[str, int]:
    values = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                values[name] = int(rest.split()[0])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return values


def _children(pid: int) -> list[int]:
    try:
        return [
            int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        ]
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return []


def _whole_kb(pid: int) -> tuple[int, int]:
    """Summed PSS and RSS of the process and its children (the trial workers), in kB."""
    pss = rss = 0
    for member in [pid, *_children(pid)]:
        try:
            for line in Path(f"/proc/{member}/smaps_rollup").read_text().splitlines():
                name, _, rest = line.partition(":")
                if name == "Pss":
                    pss += int(rest.split()[0])
                elif name == "Rss":
                    rss += int(rest.split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return pss, rss


def _finished(database: Path) -> int:
    if not database.is_file():
        return 0
    try:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=0.05) as db:
            (count,) = db.execute(
                "SELECT COUNT(*) FROM evals_app_trial WHERE finished_at IS NOT NULL"
            ).fetchone()
            return count
    except sqlite3.Error:  # not migrated yet, or busy: the next sample will tell
        return 0


def measure(trials: int) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="proctor-memory-"))
    eval_file = write_noop_eval(folder, trials)
    database = folder / ".proctor" / "proctor.sqlite3"
    process = subprocess.Popen(
        proctor_command(eval_file),
        env=proctor_env(folder),
        cwd=folder,
        stdout=subprocess.DEVNULL,
    )
    peak_kb = after_10_kb = at_all_done_kb = 0
    high_water_kb = whole_pss_kb = whole_rss_kb = whole_after_10_kb = 0
    while process.poll() is None:
        status = _status_kb(process.pid)
        rss = status.get("VmRSS", 0)
        high_water_kb = max(high_water_kb, status.get("VmHWM", 0))
        peak_kb = max(peak_kb, rss)
        pss_sum, rss_sum = _whole_kb(process.pid)
        whole_pss_kb, whole_rss_kb = max(whole_pss_kb, pss_sum), max(whole_rss_kb, rss_sum)
        done = _finished(database)
        if not after_10_kb and done >= 10:
            after_10_kb, whole_after_10_kb = rss, pss_sum
        if not at_all_done_kb and done >= trials:
            at_all_done_kb = rss
        time.sleep(0.05)
    if process.returncode != 0:
        raise SystemExit(f"proctor eval exited with {process.returncode}")
    peak_kb = max(peak_kb, high_water_kb)
    return {
        "after_10": after_10_kb / 1024,
        "all_trials_done": at_all_done_kb / 1024,
        "peak": peak_kb / 1024,
        "whole_after_10": whole_after_10_kb / 1024,
        "whole_pss": whole_pss_kb / 1024,
        "whole_rss": whole_rss_kb / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=1000)
    args = parser.parse_args()
    figures = measure(args.trials)
    print(f"`proctor eval` of {args.trials} no-op trials (one eval file, SQLite, -j 2)")
    print(f"RSS after 10 trials:        {figures['after_10']:8.1f} MB")
    print(f"RSS when all trials ended:  {figures['all_trials_done']:8.1f} MB")
    print(f"peak RSS (report included): {figures['peak']:8.1f} MB")
    print(f"with its trial workers: PSS after 10 trials {figures['whole_after_10']:.1f} MB,")
    print(
        f"  peak PSS {figures['whole_pss']:.1f} MB, peak summed RSS {figures['whole_rss']:.1f} MB"
    )
    print(f"ratio peak / after 10 trials: {figures['peak'] / figures['after_10']:.2f}")
    print(
        f"ratio peak PSS with workers / after 10 trials: "
        f"{figures['whole_pss'] / figures['whole_after_10']:.2f}"
    )
    print(f"ratio peak / {GOAL_MB} MB goal: {figures['peak'] / GOAL_MB:.2f}")
    print(f"ratio peak PSS with workers / {GOAL_MB} MB goal: {figures['whole_pss'] / GOAL_MB:.2f}")


if __name__ == "__main__":
    main()
