"""How fast one trial's event stream is taken in: events per second, against a bare loop.

One trial whose agent prints ``--events`` protocol lines (messages, commands, tool calls, mixed)
runs in a fresh `proctor eval` process; its duration as the report gives it, less that of a
one-event trial run the same way (the sandbox, the check), is the time the stream took. The bare loop is ``json.loads`` over the same
lines in this process. Peak RSS and CPU time are the `proctor eval` child's (``wait4``; the CPU
time counts the agent's too, and says what the stream cost when other work shares the machine).
Prints figures, never asserts them; the ratio is last.

    .venv/bin/python bench/ingest.py [--events 100000] [--repeats 3] [--postgres URL]

``--postgres postgresql://postgres@127.0.0.1:5432`` stores the trials in a fresh PostgreSQL
database made on that server for the run (and dropped after), instead of SQLite.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

AGENT = r"""
import json, sys
n = int(sys.argv[1])
out = sys.stdout
out.write(json.dumps({"_tag": "Started", "sessionId": "ingest", "model": "none"}) + "\n")
for i in range(n):
    k = i % 3
    if k == 0:
        line = {"_tag": "Message", "role": "assistant", "text": f"step {i}: reading the file"}
    elif k == 1:
        line = {"_tag": "Command", "command": f"grep -n todo src/{i}.py", "exitCode": 0,
                "output": "3: # todo"}
    else:
        line = {"_tag": "ToolCall", "callId": f"call_{i}", "name": "read_file",
                "input": {"path": f"src/{i}.py"}, "status": "completed"}
    out.write(json.dumps(line) + "\n")
out.write(json.dumps({"_tag": "Finished", "reason": "done"}) + "\n")
"""

EVAL_FILE = """
from proctor import case, command, profile, suite, variant

stream = suite(
    "ingest",
    prompt="print events",
    cases=[case("stream", validate=command("true"), timeout_ms=600_000)],
    variants=[variant("command", name="stream",
              profile=profile("stream", dir={folder!r}, run='python3 "$PROCTOR_PROFILE_DIR/agent.py" {events}'))],
)
"""


def agent_lines(events: int) -> list[str]:
    """The lines the agent prints, made the same way, for the bare loop."""
    folder = Path(tempfile.mkdtemp(prefix="ingest-lines-"))
    (folder / "agent.py").write_text(AGENT)
    out = subprocess.run(
        [sys.executable, str(folder / "agent.py"), str(events)],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.splitlines()


def bare_loop_s(lines: list[str]) -> float:
    started = time.perf_counter()
    for line in lines:
        json.loads(line)
    return time.perf_counter() - started


def one_eval(
    folder: Path, events: int, database_url: str | None = None
) -> tuple[float, int, float]:
    """The trial's seconds, the peak RSS (KB) and the CPU seconds of a `proctor eval` of a
    trial printing ``events``."""
    profile_dir = folder / f"agent-{events}"
    profile_dir.mkdir(exist_ok=True)
    (profile_dir / "agent.py").write_text(AGENT)
    eval_file = folder / f"ingest_{events}.eval.py"
    eval_file.write_text(EVAL_FILE.format(folder=str(profile_dir), events=events))
    env = {**os.environ, "PROCTOR_HOME": str(folder / ".proctor")}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    if database_url:
        env["DATABASE_URL"] = database_url
    proc = subprocess.Popen(
        [sys.executable, "-m", "proctor.site.cli", "eval", str(eval_file), "--json"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    report = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"proctor eval of {events} events failed: {report[-500:]!r}")
    trial = json.loads(report)["runs"][0]["trials"][0]
    if trial["status"] != "passed":
        raise SystemExit(f"the {events}-event trial ended {trial['status']}: {trial['error']}")
    return trial["duration_ms"] / 1000, usage.ru_maxrss, usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def fresh_database(server: str | None) -> Iterator[str | None]:
    """A new empty database on the PostgreSQL ``server`` for the run, dropped after; None
    (SQLite in the eval's PROCTOR_HOME) without a server."""
    if not server:
        yield None
        return
    import psycopg

    name = f"proctor_ingest_{os.getpid()}"
    with psycopg.connect(server.rstrip("/") + "/postgres", autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield server.rstrip("/") + "/" + name
    finally:
        with psycopg.connect(server.rstrip("/") + "/postgres", autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--postgres", metavar="URL", help="a PostgreSQL server to store in")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="proctor-ingest-"))
    lines = agent_lines(args.events)
    bare = statistics.median(bare_loop_s(lines) for _ in range(args.repeats))
    with fresh_database(args.postgres) as database_url:
        one_eval(folder, 1, database_url)  # makes the database
        small = [one_eval(folder, 1, database_url) for _ in range(args.repeats)]
        large = [one_eval(folder, args.events, database_url) for _ in range(args.repeats)]
    spent = statistics.median(w for w, _, _ in large) - statistics.median(w for w, _, _ in small)
    rate = len(lines) / spent
    cpu = statistics.median(c for _, _, c in large) - statistics.median(c for _, _, c in small)
    bare_rate = len(lines) / bare
    print(
        f"one trial printing {len(lines)} protocol lines on "
        f"{'PostgreSQL' if args.postgres else 'SQLite'}, medians of {args.repeats}; "
        f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(f"proctor: {spent:.2f} s more than a one-event trial, {rate:,.0f} events/s")
    print(f"CPU: {cpu:.2f} s more than a one-event run, {len(lines) / cpu:,.0f} events per CPU-s")
    print(f"bare json.loads loop: {bare:.3f} s, {bare_rate:,.0f} lines/s")
    print(
        f"peak RSS of proctor eval: {max(r for _, r, _ in large) / 1024:.0f} MB "
        f"({max(r for _, r, _ in small) / 1024:.0f} MB for one event)"
    )
    print(f"ratio (bare loop / proctor): {bare_rate / rate:.1f}x slower than json.loads")


if __name__ == "__main__":
    main()
