"""The faults of issue 11, run for real on this machine, with what each one left behind.

Each fault starts real `proctor eval`, `proctor worker` and `proctor serve` processes (loopback
PostgreSQL and Redis for the scaled mode, the embedded SQLite database otherwise), in a folder,
a database and a TMPDIR of its own, bounded in trials and in time. Every trial is one case run
once; its agent (a small Python script) notes ``start``, a ``tick`` every 0.25 s and ``end``
lines with its case name and pid in a log, writes its pid and those of the strays it starts
(``setsid sleep 600`` and others) to a folder, so after each fault the row counts:

- stuck: trials not final when the batch should have ended;
- duplicated: trials whose agent ran twice at the same time, or ended twice;
- lost: trials never run and never ended;
- processes left: agents, strays, validators and prepares still alive after their trials;
- folders left: ``proctor-*`` folders left in the fault's TMPDIR.

Prints figures, never asserts. A fault whose service is missing is skipped with its reason.

    .venv/bin/python bench/faults.py [--only NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROCTOR = str(Path(sys.executable).with_name("proctor"))
POSTGRES_ADMIN_URL = os.environ.get(
    "PROCTOR_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
# A Redis database of its own: workers of the test suite must not take these tasks.
REDIS_URL = os.environ.get("PROCTOR_BENCH_REDIS", "redis://127.0.0.1:6379/5")
FINAL = ("passed", "failed", "timed_out", "errored")

# The agent of every fault. Its behaviour comes from $AGENT_CONFIG, keyed by its prompt (the
# case name): seconds of work, strays to start, nasty lines to print.
AGENT = r"""
import json, os, subprocess, sys, time

key = os.environ["SPHYNX_PROMPT"].strip()
config = json.load(open(os.environ["AGENT_CONFIG"])).get(key, {})
log, pids = os.environ["AGENT_LOG"], os.environ["AGENT_PIDS"]


def note(what):
    with open(log, "a") as out:
        out.write(f"{what} {key} {os.getpid()} {time.time():.3f}\n")


def mark(kind, pid):
    open(os.path.join(pids, f"{kind}-{key}-{pid}"), "w").close()


def stray_then_sleep(kind):
    mark(kind, os.getpid())
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.execvp("sleep", ["sleep", "600"])


def start_stray(kind):
    if kind == "setsid":
        child = subprocess.Popen(["setsid", "sleep", "600"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        mark(kind, child.pid)
    elif kind == "double-fork":
        if os.fork() == 0:
            if os.fork() == 0:
                stray_then_sleep(kind)
            os._exit(0)
        os.wait()
    elif kind == "daemon":
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.chdir("/")
                stray_then_sleep(kind)
            os._exit(0)
        os.wait()


def emit(obj):
    print(json.dumps(obj), flush=True)


note("start")
mark("agent", os.getpid())
for kind in config.get("strays", ["setsid"]):
    start_stray(kind)
emit({"_tag": "Started", "sessionId": key, "model": "none"})
for line in config.get("nasty", []):
    sys.stdout.buffer.write(line.encode("utf-8", "surrogatepass") + b"\n")
sys.stdout.flush()
deadline = time.time() + config.get("work_s", 0.5)
while time.time() < deadline:
    note("tick")
    emit({"_tag": "Message", "role": "assistant", "text": "working"})
    time.sleep(0.25)
emit({"_tag": "Message", "role": "assistant", "text": "done"})
emit({"_tag": "Finished", "reason": "done"})
note("end")
"""

# Lines that broke the recorder (issue 11's fault table): huge ints, NUL, lone surrogates,
# timestamps out of range, an empty role, cut and deep JSON.
NASTY_LINES = [
    '{"_tag":"Usage","inputTokens":99999999999999999999999,"outputTokens":-99999999999999999999}',
    '{"_tag":"Message","role":"assistant","text":"nul \\u0000 here"}',
    '{"_tag":"Message","role":"assistant","text":"raw nul \x00 here"}',
    '{"_tag":"Message","role":"assistant","text":"lone \\ud800 surrogate"}',
    '{"_tag":"Message","role":"assistant","text":"raw lone \ud800 surrogate"}',
    '{"_tag":"Message","role":"","text":"no role"}',
    '{"_tag":"Message","role":"assistant","text":"far","at":99999999999999999999}',
    '{"_tag":"ToolCall","name":"x","input":{"n":' + "9" * 5000 + "}}",
    '{"_tag":"ToolCall","name":"x","input":' + "[" * 20000 + "]" * 20000 + "}",
    '{"_tag":"Message","role":"assistant","text":"cut',
    '{"_tag":"' + "\x00\ud800" * 10 + '"}',
    "not json at all \x00",
]


# --- one fault's place: folder, database, TMPDIR, agent --------------------------------------


@dataclass
class Store:
    """The database one fault's `proctor` processes record into, read back with plain SQL."""

    url: str | None  # a PostgreSQL URL, or None for the embedded SQLite file
    sqlite_path: Path

    def rows(self, sql: str, *params: Any) -> list[tuple]:
        if self.url is None:
            if not self.sqlite_path.exists():
                return []
            conn = sqlite3.connect(self.sqlite_path, timeout=10)
            try:
                return [tuple(r) for r in conn.execute(sql, params).fetchall()]
            except sqlite3.OperationalError:  # no such table yet
                return []
            finally:
                conn.close()
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            try:
                return [tuple(r) for r in conn.execute(sql.replace("?", "%s"), params).fetchall()]
            except psycopg.errors.UndefinedTable:
                return []

    def trials(self) -> list[tuple[str, str, int]]:
        """(case, status, attempt) of every trial in the database."""
        return self.rows(
            "SELECT c.slug, t.status, t.attempt FROM evals_app_trial t "
            "JOIN evals_app_run r ON t.run_id = r.id "
            "JOIN evals_app_caseversion v ON r.case_version_id = v.id "
            "JOIN evals_app_case c ON v.case_id = c.id"
        )

    def count(self, status: str) -> int:
        return sum(1 for _, s, _ in self.trials() if s == status)


@dataclass
class Place:
    name: str
    root: Path
    store: Store
    env: dict[str, str]
    config: dict[str, dict] = field(default_factory=dict)
    started: list[subprocess.Popen] = field(default_factory=list)

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def pids(self) -> Path:
        return self.root / "pids"

    @property
    def log(self) -> Path:
        return self.root / "agent.log"

    def write_eval(self, cases: dict[str, str], config: dict[str, dict]) -> None:
        """An eval of one-trial cases (name -> extra ``case(...)`` arguments) run by the agent."""
        self.config = config
        (self.root / "agent_config.json").write_text(json.dumps(config))
        agent_env = {
            "AGENT_CONFIG": str(self.root / "agent_config.json"),
            "AGENT_LOG": str(self.log),
            "AGENT_PIDS": str(self.pids),
        }
        case_lines = "\n".join(
            f"    case({name!r}, variables={{'task': {name!r}}}{extra}"
            + ("" if "validate=" in extra else ", validate=command('true')")
            + "),"
            for name, extra in cases.items()
        )
        (self.project / f"{self.name}.eval.py").write_text(
            textwrap.dedent(
                f"""
                import os, time
                from proctor import case, command, profile, suite, variant

                PIDS = {str(self.pids)!r}


                def hangs(ctx):
                    open(os.path.join(PIDS, f"validator-check-{{os.getpid()}}"), "w").close()
                    time.sleep(3600)
                    return True


                def prepare_hangs(ctx):
                    open(os.path.join(PIDS, f"prepare-prepare-{{os.getpid()}}"), "w").close()
                    time.sleep(3600)
                    return {{}}


                agent = profile("bench-agent", run={"python3 " + str(self.root / "agent.py")!r},
                                env={agent_env!r})
                s = suite({self.name!r}, prompt="{{{{task}}}}", trials=1, cases=[
                """
            ).lstrip()
            + case_lines
            + "\n], variants=[variant('command', profile=agent)])\n"
        )

    def popen(self, *args: str, log: str, new_session: bool = False) -> subprocess.Popen:
        """Start ``proctor *args``; its output goes to ``log`` (stdout and stderr together when
        ``log`` ends in ``.log``, else stderr to ``<log>.err``)."""
        joined = log.endswith(".log")
        with open(self.root / log, "w") as out, open(self.root / f"{log}.err", "w") as err:
            proc = subprocess.Popen(
                [PROCTOR, *args],
                cwd=self.project,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT if joined else err,
                start_new_session=new_session,
            )
        self.started.append(proc)
        return proc

    def run(self, *args: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(
            [PROCTOR, *args],
            cwd=self.project,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


@contextlib.contextmanager
def place(name: str, *, postgres: bool = False, **env: str) -> Iterator[Place]:
    """A fault's folder, database and TMPDIR; removes them, and kills what was started in it."""
    root = Path(tempfile.mkdtemp(prefix=f"proctor-bench-faults-{name}-"))
    for sub in ("project", "tmp", "pids"):
        (root / sub).mkdir()
    (root / "agent.py").write_text(AGENT)
    db_name = None
    url = None
    if postgres:
        import psycopg

        db_name = f"proctor_bench_faults_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{db_name}"')
        url = f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0]}/{db_name}"
    home = root / "home"
    base_env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "PROCTOR_HOME", "DJANGO_SETTINGS_MODULE")
    }
    base_env.update(PROCTOR_HOME=str(home), TMPDIR=str(root / "tmp"), **env)
    if url:
        base_env["DATABASE_URL"] = url
    spot = Place(name, root, Store(url, home / "proctor.sqlite3"), base_env)
    try:
        yield spot
    finally:
        for proc in spot.started:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        for proc in spot.started:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    if os.getpgid(proc.pid) == proc.pid:  # a worker, in a session of its own
                        os.killpg(proc.pid, signal.SIGKILL)
                    else:
                        proc.kill()
                proc.wait()
        kill_noted(spot)
        if db_name:
            import psycopg

            with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        shutil.rmtree(root, ignore_errors=True)


# --- what a fault left ------------------------------------------------------------------------


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped is dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def noted_pids(spot: Place) -> list[tuple[str, int]]:
    """(what, pid) of every agent, stray, validator and prepare the fault's trials started."""
    noted = []
    for path in spot.pids.iterdir():
        kind, _, pid = path.name.rpartition("-")
        noted.append((kind, int(pid)))
    return noted


def alive(spot: Place, *, grace_s: float = 1.5) -> list[str]:
    deadline = time.monotonic() + grace_s
    while True:
        left = [f"{kind} pid {pid}" for kind, pid in noted_pids(spot) if running(pid)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def kill_noted(spot: Place) -> None:
    if not spot.pids.exists():
        return
    for _, pid in noted_pids(spot):
        if running(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


@dataclass
class AgentRun:
    pid: int
    started: float
    last: float
    ended: bool = False


def agent_runs(spot: Place) -> dict[str, list[AgentRun]]:
    runs: dict[str, dict[int, AgentRun]] = {}
    if not spot.log.exists():
        return {}
    for line in spot.log.read_text().splitlines():
        what, key, pid, at = line.split()
        by_pid = runs.setdefault(key, {})
        if what == "start":
            by_pid[int(pid)] = AgentRun(int(pid), float(at), float(at))
        else:
            by_pid[int(pid)].last = float(at)
            by_pid[int(pid)].ended |= what == "end"
    return {key: sorted(r.values(), key=lambda r: r.started) for key, r in runs.items()}


def duplicated(spot: Place) -> list[str]:
    """Cases whose agent ran twice at once (one run started before another's last note), or
    whose agent ended twice."""
    found = []
    for key, runs in agent_runs(spot).items():
        overlap = any(b.started < a.last for a, b in zip(runs, runs[1:], strict=False))
        if overlap or sum(r.ended for r in runs) > 1:
            found.append(f"{key} ({len(runs)} runs)")
    return found


@dataclass
class Row:
    fault: str
    stuck: int = 0
    duplicated: int = 0
    lost: int = 0
    processes: int = 0
    folders: int = 0
    note: str = ""
    skipped: str = ""


def measure(spot: Place, fault: str, *, left: list[str] | None = None, note: str = "") -> Row:
    """The row of a fault whose batch should have ended by now."""
    trials = spot.store.trials()
    runs = agent_runs(spot)
    stuck = [case for case, status, _ in trials if status not in FINAL]
    final = {case for case, status, _ in trials if status in FINAL}
    lost = [key for key in spot.config if key not in runs and key not in final]
    left_at_end = alive(spot)
    if left is not None:
        note = f"{len(left)} alive 3 s after the kill, {len(left_at_end)} at the end; {note}"
    left = sorted(set(left or []) | set(left_at_end))
    folders = sorted(p.name for p in spot.tmp.iterdir() if p.name.startswith("proctor-"))
    dups = duplicated(spot)
    statuses: dict[str, int] = {}
    for _, status, attempt in trials:
        label = status if attempt <= 1 else f"{status}@{attempt}"
        statuses[label] = statuses.get(label, 0) + 1
    details = [
        ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) or "no trials",
        f"{len(noted_pids(spot))} processes watched",
    ]
    for what, names in (("stuck", stuck), ("dup", dups), ("lost", lost), ("left", left)):
        if names:
            details.append(f"{what}: {', '.join(names[:4])}")
    if folders:
        details.append(f"folders: {', '.join(folders[:3])}")
    if note:
        details.append(note)
    return Row(fault, len(stuck), len(dups), len(lost), len(left), len(folders), "; ".join(details))


def wait_for(condition: Callable[[], object], *, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def tracebacks(*texts: str) -> str:
    n = sum(text.count("Traceback") for text in texts)
    return f"{n} tracebacks in proctor's output" if n else ""


# --- services ------------------------------------------------------------------------------------


def postgres_missing() -> str | None:
    try:
        import psycopg

        psycopg.connect(POSTGRES_ADMIN_URL, connect_timeout=3).close()
    except Exception as exc:
        return f"PostgreSQL is not reachable at {POSTGRES_ADMIN_URL} ({type(exc).__name__})"
    return None


def redis_missing() -> str | None:
    try:
        import redis

        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
    except Exception as exc:
        return f"Redis is not reachable at {REDIS_URL} ({type(exc).__name__})"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- the faults ----------------------------------------------------------------------------------


def worker_ready(worker: subprocess.Popen, log: Path) -> bool:
    wait_for(lambda: worker.poll() is not None or " ready." in log.read_text(), timeout=60)
    return worker.poll() is None and " ready." in log.read_text()


def after_next_eval(spot: Place) -> int:
    """Run a one-trial `proctor eval` in the fault's TMPDIR (in-process, no broker: the
    sandbox it makes sweeps the folders of dead Proctor processes); the folders left then."""
    folder = spot.root / "next"
    folder.mkdir()
    (folder / "next.eval.py").write_text(
        "from proctor import case, command, profile, suite, variant\n"
        's = suite("next", prompt="hi", cases=[case("hi", validate=command("true"))],\n'
        '          variants=[variant("command", profile=profile("hi", run="echo hi"))])\n'
    )
    env = {k: v for k, v in spot.env.items() if k != "REDIS_URL"}
    subprocess.run(
        [PROCTOR, "eval", "--fail-under", "0"],
        cwd=folder,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
    )
    return len([p for p in spot.tmp.iterdir() if p.name.startswith("proctor-")])


def worker_killed() -> Row:
    """A `proctor worker` killed with SIGKILL mid-batch: 2 workers, 8 trials of 5 s, 2 s leases."""
    fault = "worker SIGKILL mid-batch"
    reason = postgres_missing() or redis_missing()
    if reason:
        return Row(fault, skipped=reason)
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
    try:
        with place(
            "worker-killed",
            postgres=True,
            REDIS_URL=REDIS_URL,
            PROCTOR_LEASE_S="2",
            PROCTOR_MAX_ATTEMPTS="2",
        ) as spot:
            cases = {f"w{n}": "" for n in range(8)}
            spot.write_eval(cases, {key: {"work_s": 5} for key in cases})
            migrated = spot.run("migrate", "--no-input", timeout=120)
            if migrated.returncode:
                return Row(fault, skipped=f"migrate failed: {migrated.stderr[-300:]}")
            workers = []
            for name in ("doomed", "survivor"):
                worker = spot.popen(
                    "worker", "-c", "2", "--loglevel", "info", log=f"{name}.log", new_session=True
                )
                if not worker_ready(worker, spot.root / f"{name}.log"):
                    return Row(fault, skipped=f"worker {name} did not start")
                workers.append(worker)
            doomed = workers[0]
            submitted = spot.run("eval", "--json", "--no-wait", timeout=120)
            if submitted.returncode:
                return Row(fault, skipped=f"eval --no-wait failed: {submitted.stderr[-300:]}")
            batch = json.loads(submitted.stdout)["batch"]

            def doomed_cases() -> list[str]:
                return [
                    slug
                    for (slug,) in spot.store.rows(
                        "SELECT c.slug FROM evals_app_trial t "
                        "JOIN evals_app_run r ON t.run_id = r.id "
                        "JOIN evals_app_caseversion v ON r.case_version_id = v.id "
                        "JOIN evals_app_case c ON v.case_id = c.id "
                        "WHERE t.status = 'running' AND t.lease_owner LIKE ?",
                        f"%:{doomed.pid}:%",
                    )
                ]

            wait_for(lambda: len(doomed_cases()) >= 2, timeout=30)
            lost_cases = doomed_cases()
            os.killpg(doomed.pid, signal.SIGKILL)
            killed_at = time.time()
            doomed.wait()
            # The killed worker's agents and strays (the survivor's own are still at work).
            time.sleep(3)
            left_by_kill = [
                f"{kind} pid {pid} (killed worker)"
                for kind, pid in noted_pids(spot)
                if kind.rpartition("-")[2] in lost_cases
                and (spot.pids / f"{kind}-{pid}").stat().st_mtime < killed_at
                and running(pid)
            ]
            finished = wait_for(
                lambda: (
                    spot.store.rows("SELECT status FROM evals_app_batch WHERE id = ?", batch)
                    == [("finished",)]
                ),
                timeout=60,
            )
            note = f"{len(lost_cases)} trials on the killed worker"
            if not finished:
                note += "; batch not finished after 60 s"
            note = "; ".join(
                filter(None, [note, tracebacks((spot.root / "survivor.log").read_text())])
            )
            row = measure(spot, fault, left=left_by_kill, note=note)
            if row.folders:
                row.note += f"; {after_next_eval(spot)} folders left after the next `proctor eval`"
            return row
    finally:
        redis.Redis.from_url(REDIS_URL).flushdb()


def eval_killed() -> Row:
    """`proctor eval` killed with kill -9 mid-batch (SQLite, 3 trials of 6 s at once); then
    `proctor serve` on the same database picks up the unfinished trials."""
    fault = "eval kill -9 mid-batch"
    with place("eval-killed", PROCTOR_LEASE_S="2", DJANGO_SECRET_KEY="b" * 50) as spot:
        cases = {f"e{n}": ", timeout_ms=120_000" for n in range(3)}
        spot.write_eval(cases, {key: {"work_s": 6} for key in cases})
        evaluation = spot.popen("eval", "-j", "3", "--fail-under", "0", log="eval.out")
        if (
            not wait_for(
                lambda: (
                    len([k for k, _ in noted_pids(spot) if k.startswith("agent-")]) >= 3
                    or evaluation.poll() is not None
                ),
                timeout=60,
            )
            or evaluation.poll() is not None
        ):
            err = (spot.root / "eval.out.err").read_text().strip().splitlines()[-1:]
            return Row(fault, skipped=f"the eval's agents did not all start {err}")
        evaluation.send_signal(signal.SIGKILL)
        evaluation.wait()
        left_by_kill = alive(spot, grace_s=3)
        folders_after_kill = len([p for p in spot.tmp.iterdir() if p.name.startswith("proctor-")])
        kill_noted(spot)  # what the kill left must not run beside the re-queued trials
        serve = spot.popen("serve", f"127.0.0.1:{free_port()}", log="serve.log")
        recovered = wait_for(
            lambda: (
                len(spot.store.trials()) == 3
                and all(status in FINAL for _, status, _ in spot.store.trials())
            ),
            timeout=60,
        )
        serve.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            serve.wait(timeout=20)
        note = f"{folders_after_kill} folders right after the kill; serve re-ran the rest"
        if not recovered:
            note += "; serve did not end every trial in 60 s"
        note = "; ".join(filter(None, [note, tracebacks((spot.root / "serve.log").read_text())]))
        return measure(spot, fault, left=left_by_kill, note=note)


def strays() -> Row:
    """Agents that start `setsid sleep 600 &`, a double fork and a daemon (local sandbox), after
    a normal finish and after a timeout."""
    fault = "strays: setsid/fork/daemon"
    with place("strays") as spot:
        kinds = ["setsid", "double-fork", "daemon"]
        cases = {"finish": "", "timeout": ", timeout_ms=2000"}
        spot.write_eval(
            cases,
            {
                "finish": {"strays": kinds, "work_s": 0.5},
                "timeout": {"strays": kinds, "work_s": 60},
            },
        )
        result = spot.run("eval", "-j", "2", "--fail-under", "0", timeout=120)
        return measure(spot, fault, note=tracebacks(result.stderr))


def serve_beside_eval() -> Row:
    """`proctor serve` started while `proctor eval` runs 8 trials (4 at once) on the same SQLite
    database."""
    fault = "serve beside a running eval"
    with place("serve-beside", PROCTOR_LEASE_S="3", DJANGO_SECRET_KEY="s" * 50) as spot:
        cases = {f"s{n}": "" for n in range(8)}
        spot.write_eval(cases, {key: {"work_s": 4} for key in cases})
        evaluation = spot.popen("eval", "--json", "-j", "4", log="eval.out")
        if not wait_for(lambda: spot.store.count("running") >= 4, timeout=60):
            return Row(fault, skipped="the eval's first four trials did not start")
        serve = spot.popen("serve", f"127.0.0.1:{free_port()}", log="serve.log")
        wait_for(lambda: "Proctor at" in (spot.root / "serve.log").read_text(), timeout=30)
        with contextlib.suppress(subprocess.TimeoutExpired):
            evaluation.wait(timeout=60)
        serve.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            serve.wait(timeout=20)
        out = [(spot.root / n).read_text() for n in ("eval.out.err", "serve.log")]
        integrity = sum(text.count("IntegrityError") for text in out)
        note = "; ".join(
            filter(
                None,
                [
                    tracebacks(*out),
                    f"{integrity} IntegrityErrors" if integrity else "",
                    f"eval exit {evaluation.returncode}" if evaluation.returncode else "",
                ],
            )
        )
        return measure(spot, fault, note=note)


def hanging_checks() -> Row:
    """A Python validator and a prepare that hang, each with a 1 s limit."""
    fault = "hanging validator / prepare"
    with place("hangs") as spot:
        cases = {
            "validator": ", check_timeout_ms=1000, validate=hangs",
            "prepare": ", prepare_timeout_ms=1000, prepare=prepare_hangs, validate=command('true')",
        }
        spot.write_eval(cases, {key: {"work_s": 0.3} for key in cases})
        started = time.monotonic()
        try:
            result = spot.run("eval", "-j", "2", "--fail-under", "0", timeout=60)
            note = f"eval took {time.monotonic() - started:.1f}s"
            note = "; ".join(filter(None, [note, tracebacks(result.stderr)]))
        except subprocess.TimeoutExpired:
            note = "eval still running after 60 s (killed)"
        return measure(spot, fault, note=note)


def nasty_lines() -> list[Row]:
    """Agents printing nasty protocol lines (huge ints, NUL, surrogates, deep JSON), on SQLite
    and, when it is reachable, PostgreSQL."""
    fault = "nasty protocol lines"
    rows = []
    backends = [("sqlite", False)] + ([] if postgres_missing() else [("postgres", True)])
    for label, postgres in backends:
        with place(f"nasty-{label}", postgres=postgres) as spot:
            if postgres:
                migrated = spot.run("migrate", "--no-input", timeout=120)
                if migrated.returncode:
                    continue
            cases = {f"n{n}": "" for n in range(3)}
            spot.write_eval(cases, {key: {"work_s": 0.3, "nasty": NASTY_LINES} for key in cases})
            result = spot.run("eval", "--json", "-j", "3", "--fail-under", "0", timeout=120)
            errored = sum(1 for _, status, _ in spot.store.trials() if status == "errored")
            kinds = spot.store.rows("SELECT kind, COUNT(*) FROM evals_app_event GROUP BY kind")
            note = "; ".join(
                filter(
                    None,
                    [
                        f"{errored} errored" if errored else "",
                        "events " + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds)),
                        tracebacks(result.stderr),
                        f"eval exit {result.returncode}" if result.returncode not in (0, 1) else "",
                    ],
                )
            )
            rows.append(measure(spot, f"{fault} ({label})", note=note))
    return rows


FAULTS: dict[str, Callable[[], Row | list[Row]]] = {
    "worker-killed": worker_killed,
    "eval-killed": eval_killed,
    "strays": strays,
    "serve-beside-eval": serve_beside_eval,
    "hanging-checks": hanging_checks,
    "nasty-lines": nasty_lines,
}

COLUMNS = f"{'fault':<34} {'stuck':>5} {'dup':>4} {'lost':>4} {'procs':>5} {'dirs':>4}  notes"


def print_row(row: Row) -> None:
    if row.skipped:
        print(f"{row.fault:<34} skipped: {row.skipped}", flush=True)
        return
    print(
        f"{row.fault:<34} {row.stuck:>5} {row.duplicated:>4} {row.lost:>4} "
        f"{row.processes:>5} {row.folders:>4}  {row.note}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", choices=sorted(FAULTS), help="run this fault only")
    args = parser.parse_args()

    print(f"faults of issue 11 on this machine ({time.strftime('%Y-%m-%d %H:%M:%S')})")
    print(COLUMNS)
    rows: list[Row] = []
    for name, fault in FAULTS.items():
        if args.only and name != args.only:
            continue
        started = time.monotonic()
        try:
            result = fault()
        except Exception as exc:  # a fault that could not be set up is reported, not raised
            result = Row(name, skipped=f"{type(exc).__name__}: {str(exc)[:200]}")
        for row in result if isinstance(result, list) else [result]:
            if row.note or not row.skipped:
                row.note = f"{row.note}; {time.monotonic() - started:.0f}s".lstrip("; ")
            print_row(row)
            rows.append(row)
    ran = [row for row in rows if not row.skipped]
    print(
        f"total: {sum(r.stuck for r in ran)} stuck, {sum(r.duplicated for r in ran)} duplicated, "
        f"{sum(r.lost for r in ran)} lost, {sum(r.processes for r in ran)} processes left, "
        f"{sum(r.folders for r in ran)} folders left"
    )


if __name__ == "__main__":
    main()
