"""How fast a trial reads an agent's output: ``--megabytes`` MiB of plain 1,000-character lines
through a command-harness trial of a real `proctor eval`, against the same bytes through a bare
pipe (``cat > /dev/null``) in this same run.

The test (tests/e2e/test_process_faults.py) only checks that the last line after the gigabyte is
read; the speed is this figure (it was 5.9 MB/s before the line splitter, and took 86 s at load
13 when the test still asserted a minute). Prints figures, never asserts them; the ratio is last.

    .venv/bin/python bench/pipe_speed.py [--megabytes 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _lines(megabytes: int) -> str:
    return f"head -c {megabytes}M /dev/zero | tr '\\0' x | fold -w 1000; echo"


def bare(megabytes: int) -> float:
    started = time.monotonic()
    subprocess.run(["bash", "-c", f"{{ {_lines(megabytes)}; }} | cat > /dev/null"], check=True)
    return time.monotonic() - started


def through_proctor(megabytes: int, folder: Path) -> float:
    run = (
        f"{_lines(megabytes)}; "
        'echo \'{"_tag": "Message", "role": "assistant", "text": "printed it all"}\''
    )
    (folder / "loud.eval.py").write_text(
        "from proctor import case, command, profile, suite, variant\n\n"
        'loud = suite("loud", prompt="print it", cases=[case("lines", timeout_ms=3_600_000,\n'
        '    validate=command("true"))],\n'
        f'    variants=[variant("command", profile=profile("loud", run={run!r}))])\n'
    )
    env = {**os.environ, "PROCTOR_HOME": str(folder / "home")}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "proctor.site.cli", "eval", "--json", "--fail-under", "0"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    took = time.monotonic() - started
    report = json.loads(done.stdout)
    (trial,) = report["runs"][0]["trials"]
    if trial["answer"] != "printed it all":
        raise SystemExit(f"the line after the output was not read: {trial}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=1024)
    options = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="pipe-speed-"))
    try:
        floor = bare(options.megabytes)
        proctor = through_proctor(options.megabytes, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    size = options.megabytes
    print(f"bare pipe: {floor:.1f} s ({size / floor:.0f} MB/s)")
    print(
        f"proctor eval, one trial (start-up included): {proctor:.1f} s ({size / proctor:.0f} MB/s)"
    )
    print(f"ratio: {proctor / floor:.2f}x")


if __name__ == "__main__":
    main()
