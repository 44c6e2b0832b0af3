"""Database bytes per trial: N no-op trials (N cases of one eval file, one trial each) recorded
by a real `proctor eval` in embedded mode (SQLite), measured table by table.

Sizes come from SQLite's ``dbstat`` table (pages in use per table and index), so free pages
left by the schema set-up don't count. The same N is run twice on fresh homes at two sizes,
so the per-trial figure is the marginal cost (what one more trial adds), not the fixed cost of
an empty database. Prints the largest tables, then the ratio to the 10 KB/trial goal last.

    .venv/bin/python bench/storage.py [--trials 1000]
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from noop_eval import proctor_command, proctor_env, write_noop_eval  # noqa: E402

GOAL_BYTES_PER_TRIAL = 10 * 1024


def recorded_bytes(trials: int) -> tuple[int, dict[str, int]]:
    folder = Path(tempfile.mkdtemp(prefix="proctor-storage-"))
    eval_file = write_noop_eval(folder, trials)
    subprocess.run(
        proctor_command(eval_file),
        env=proctor_env(folder),
        cwd=folder,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    database = sqlite3.connect(folder / ".proctor" / "proctor.sqlite3")
    database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    tables = dict(
        database.execute(
            "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
        ).fetchall()
    )
    return sum(tables.values()), tables


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=1000)
    args = parser.parse_args()
    small_n = max(args.trials // 10, 1)

    small_total, _ = recorded_bytes(small_n)
    total, tables = recorded_bytes(args.trials)
    print(f"{args.trials} no-op trials (one eval file, {args.trials} cases, SQLite)")
    print(f"{'table or index':<48} {'bytes':>12} {'per trial':>10}")
    for name, size in list(tables.items())[:12]:
        print(f"{name:<48} {size:>12,} {size / args.trials:>10,.0f}")
    marginal = (total - small_total) / (args.trials - small_n)
    print(f"{'database total':<48} {total:>12,} {total / args.trials:>10,.0f}")
    print(f"{small_n} trials: {small_total:,} bytes")
    print(f"marginal bytes per trial ({small_n} -> {args.trials}): {marginal:,.0f}")
    print(f"ratio to the {GOAL_BYTES_PER_TRIAL:,}-byte goal: {marginal / GOAL_BYTES_PER_TRIAL:.2f}")


if __name__ == "__main__":
    main()
