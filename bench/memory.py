"""Peak resident memory of a real `proctor eval` process over N no-op trials (default 1,000),
including the end of the run (the report it prints and benchmark.json).

The process is sampled every 50 ms from /proc (VmRSS, and VmHWM, the kernel's own high-water
mark, on the last sample); the finished-trial count is read from its SQLite database at each
sample, so the baseline is the same process's RSS once 10 trials had finished. The agents'
processes are not counted: they are the workload, not the harness. Prints the ratio last.

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
    high_water_kb = 0
    while process.poll() is None:
        status = _status_kb(process.pid)
        rss = status.get("VmRSS", 0)
        high_water_kb = max(high_water_kb, status.get("VmHWM", 0))
        peak_kb = max(peak_kb, rss)
        done = _finished(database)
        if not after_10_kb and done >= 10:
            after_10_kb = rss
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
    print(f"ratio peak / after 10 trials: {figures['peak'] / figures['after_10']:.2f}")
    print(f"ratio peak / {GOAL_MB} MB goal: {figures['peak'] / GOAL_MB:.2f}")


if __name__ == "__main__":
    main()
