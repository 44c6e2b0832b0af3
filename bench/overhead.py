"""Proctor's overhead per trial, against a bare shell loop doing the same processes.

Each trial of a no-op agent starts the agent's process and a trivial command check. The
baseline runs those same two processes per trial in a plain loop (with as many threads as
Proctor's -j), in this same process, so the ratio is what Proctor adds: sandboxes, recording,
the database, artifacts. Prints ratios, never asserts times.

    .venv/bin/python bench/overhead.py [--trials 40]
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

AGENT = """echo '{"_tag":"Started","sessionId":"noop","model":"none"}'; echo '{"_tag":"Finished","reason":"done"}'"""
CHECK = "true"

EVAL_FILE = f"""
from proctor import case, command, profile, suite, variant

noop = suite(
    "overhead",
    prompt="do nothing",
    cases=[case("noop", validate=command({CHECK!r}))],
    variants=[variant("command", name="noop", profile=profile("noop", run={AGENT!r}))],
)
"""


def bare_loop(trials: int, jobs: int) -> float:
    def one(_: int) -> None:
        subprocess.run(
            ["bash", "-c", AGENT], stdin=subprocess.DEVNULL, capture_output=True, check=True
        )
        subprocess.run(
            ["bash", "-c", CHECK], stdin=subprocess.DEVNULL, capture_output=True, check=True
        )

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, range(trials)))
    return time.perf_counter() - started


def proctor_batch(folder: Path, trials: int, jobs: int) -> float:
    from django.core.management import call_command

    started = time.perf_counter()
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        call_command(
            "eval", str(folder / "noop.eval.py"), "--trials", str(trials), "-j", str(jobs), "--json"
        )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=40)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="proctor-bench-"))
    (folder / "noop.eval.py").write_text(EVAL_FILE)
    os.environ["PROCTOR_HOME"] = str(folder / ".proctor")
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "proctor.settings"
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import django

    django.setup()
    from runner.jobs.database import ensure_database

    ensure_database()
    proctor_batch(folder, 2, 1)  # warm up: imports, first queries

    print(f"{args.trials} trials of a no-op agent with a `true` check (SQLite, local sandbox)")
    print(f"{'-j':>3} {'bare loop s':>12} {'proctor s':>10} {'ratio':>7} {'trials/s':>9}")
    for jobs in (1, 2):
        base = bare_loop(args.trials, jobs)
        ours = proctor_batch(folder, args.trials, jobs)
        print(
            f"{jobs:>3} {base:>12.2f} {ours:>10.2f} {ours / base:>7.2f} {args.trials / ours:>9.1f}"
        )


if __name__ == "__main__":
    main()
