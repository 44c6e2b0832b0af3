"""`proctor eval --server` end to end: a real `proctor serve` and `proctor worker` on PostgreSQL
and Redis, each in its own empty folder, and the CLI in a third folder holding only the eval.

The CLI validates and bundles locally, uploads what the server lacks, and the worker runs the
batch from the bundles alone; the CLI prints what a local run prints and exits the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from conftest import PROCTOR, free_port, proctor_env, run_proctor
from e2e.running import Backend

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

# Its own Redis database: another test run's worker must not take these tasks.
SERVER_REDIS_DB = 11
# The server takes bundles of at most 1 MB, so a 2 MB data file shows its 413.
SERVER_BUNDLE_MAX_MB = "1"

AGENT = """\
#!/usr/bin/env bash
# Writes the fixed total; prints the protocol's events.
echo '{"_tag":"Started","sessionId":"remote-1","model":"scripted"}'
echo 'export const total = 6;' > total.ts
echo '{"_tag":"FileChange","paths":["'"$SPHYNX_WORKSPACE"'/total.ts"]}'
echo '{"_tag":"Message","role":"assistant","text":"Fixed the total."}'
echo '{"_tag":"Finished","reason":"done"}'
"""

EVAL = """\
from pathlib import Path

from proctor import Verdict, case, profile, suite, variant

EXPECTED = (Path(__file__).parent / "expected.txt").read_text().strip()


def total_is_fixed(ctx) -> Verdict:
    return Verdict(EXPECTED in ctx.read_text("total.ts"), f"total.ts says {EXPECTED}")


def total_is_seven(ctx) -> bool:
    return "total = 7" in ctx.read_text("total.ts")


shop = suite(
    "shop",
    prompt="Fix the total",
    cases=[
        case("fix-total", validate=[total_is_fixed]),
        case("wrong-total", validate=[total_is_seven]),
    ],
    variants=[
        variant(
            "command",
            model="scripted",
            profile=profile("scripted", dir="./agent", run='bash "$PROCTOR_PROFILE_DIR/agent.sh"'),
        )
    ],
)
"""


def write_project(folder: Path) -> Path:
    """An eval folder: the eval file, a data file it reads at import, and the agent's profile."""
    (folder / "agent").mkdir(parents=True)
    (folder / "agent" / "agent.sh").write_text(AGENT)
    (folder / "expected.txt").write_text("total = 6\n")
    (folder / "shop.eval.py").write_text(textwrap.dedent(EVAL))
    return folder


@dataclass
class Server:
    url: str
    token: str
    database: Backend  # the server's PostgreSQL, read with plain SQL
    env: dict[str, str]

    def bundle_count(self) -> int:
        return self.database.scalar("SELECT COUNT(*) FROM evals_app_bundle")

    def batch_ids(self) -> list[int]:
        return [i for (i,) in self.database.rows("SELECT id FROM evals_app_batch ORDER BY id")]

    def trial_statuses(self, batch: int) -> dict[str, list[str]]:
        rows = self.database.rows(
            "SELECT c.slug, t.status FROM evals_app_trial t JOIN evals_app_run r ON t.run_id = r.id "
            "JOIN evals_app_caseversion v ON r.case_version_id = v.id "
            "JOIN evals_app_case c ON v.case_id = c.id WHERE r.batch_id = ? ORDER BY c.slug, t.id",
            batch,
        )
        statuses: dict[str, list[str]] = {}
        for slug, status in rows:
            statuses.setdefault(slug, []).append(status)
        return statuses


def _start(argv: list[str], *, cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _wait_for(ready, process: subprocess.Popen, log: Path, what: str) -> None:
    for _ in range(600):
        if process.poll() is not None:
            break
        if ready():
            return
        time.sleep(0.1)
    pytest.fail(f"{what} did not start:\n{log.read_text()}")


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/login/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def server(postgres_admin_url: str, redis_url: str, tmp_path_factory) -> Iterator[Server]:
    """`proctor serve` and `proctor worker` sharing one PostgreSQL database and one Redis,
    with alice (acme) holding a token and charlie in globex."""
    import psycopg
    import redis

    name = f"proctor_server_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    database_url = f"{postgres_admin_url.rsplit('/', 1)[0]}/{name}"
    broker = f"{redis_url.rsplit('/', 1)[0]}/{SERVER_REDIS_DB}"
    redis.Redis.from_url(broker).flushdb()

    def home(role: str) -> tuple[Path, dict[str, str]]:
        folder = tmp_path_factory.mktemp(role)
        return folder, proctor_env(
            folder / ".proctor",
            HOME=str(folder),
            DATABASE_URL=database_url,
            REDIS_URL=broker,
            PROCTOR_BUNDLE_MAX_MB=SERVER_BUNDLE_MAX_MB,
        )

    server_dir, server_env = home("server")
    worker_dir, worker_env = home("worker")
    migrated = run_proctor("migrate", "--no-input", cwd=server_dir, env=server_env)
    assert migrated.returncode == 0, migrated.stderr
    for user, org in (("alice", "acme"), ("charlie", "globex")):
        made = run_proctor(
            "createuser",
            user,
            "--org",
            org,
            "--password",
            "a-long-password",
            cwd=server_dir,
            env=server_env,
        )
        assert made.returncode == 0, made.stderr
    token = run_proctor("createtoken", "alice", cwd=server_dir, env=server_env).stdout.strip()

    url = f"http://127.0.0.1:{free_port()}"
    serve_log, worker_log = server_dir / "serve.log", worker_dir / "worker.log"
    serve = _start(
        [PROCTOR, "serve", url.removeprefix("http://")],
        cwd=server_dir,
        env=server_env,
        log=serve_log,
    )
    worker = _start([PROCTOR, "worker", "-c", "2"], cwd=worker_dir, env=worker_env, log=worker_log)
    try:
        _wait_for(lambda: _answers(url), serve, serve_log, "proctor serve")
        _wait_for(lambda: " ready." in worker_log.read_text(), worker, worker_log, "proctor worker")
        yield Server(url, token, Backend("postgres", {"DATABASE_URL": database_url}), server_env)
    finally:
        _stop(serve)
        _stop(worker)
        with psycopg.connect(postgres_admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "project")


@pytest.fixture
def client_env(tmp_path: Path) -> dict[str, str]:
    """The submitter's environment: no database, no broker, its own home."""
    return proctor_env(tmp_path / "client-home", HOME=str(tmp_path))


def submit(
    project: Path, client_env: dict[str, str], *args: str, timeout: float = 180, **env: str
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PROCTOR, "eval", *args],
        cwd=project,
        env={**client_env, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def one_line(result: subprocess.CompletedProcess) -> str:
    """The one line a refused run prints on stderr (nothing on stdout)."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert result.stdout == ""
    return lines[0]


def test_it_runs_the_batch_on_the_server_and_prints_it_like_a_local_run(
    server: Server, project: Path, client_env: dict[str, str]
):
    before = server.batch_ids()

    result = submit(project, client_env, "--server", server.url, "--token", server.token)

    assert result.returncode == 0, result.stderr
    (batch,) = set(server.batch_ids()) - set(before)
    assert server.trial_statuses(batch) == {"fix-total": ["passed"], "wrong-total": ["failed"]}
    assert f"Batch {batch}" in result.stdout
    assert "shop / fix-total" in result.stdout and "1/1" in result.stdout
    assert f"{server.url}/batches/{batch}/" in result.stdout + result.stderr
    assert "2 trials" in result.stderr  # the same first line as a local run
    assert (
        "uploaded 2 new bundles" in result.stderr.lower()
    )  # the eval folder and the agent's profile
    # The submitter needed no database of its own.
    assert not (Path(client_env["PROCTOR_HOME"]) / "proctor.sqlite3").exists()


def test_a_second_run_uploads_nothing_new(server: Server, project: Path, client_env):
    first = submit(project, client_env, "--server", server.url, "--token", server.token)
    assert first.returncode == 0, first.stderr
    bundles = server.bundle_count()

    again = submit(project, client_env, "--server", server.url, "--token", server.token)

    assert again.returncode == 0, again.stderr
    assert "uploaded 0 new bundles" in again.stderr.lower()
    assert server.bundle_count() == bundles


def _keys(report: dict) -> tuple:
    run = report["runs"][0]
    trial = run["trials"][0]
    return (
        set(report),
        set(run),
        set(trial),
        set(trial["checks"][0]),
        set(trial["usage"]),
        set(trial["conversation"]),
    )


def test_json_has_the_keys_of_a_local_run(server: Server, project: Path, client_env, tmp_path):
    remote = submit(project, client_env, "--server", server.url, "--token", server.token, "--json")
    local = submit(project, proctor_env(tmp_path / "local-home"), "--json")

    assert remote.returncode == local.returncode == 0, remote.stderr + local.stderr
    remote_report, local_report = json.loads(remote.stdout), json.loads(local.stdout)
    assert _keys(remote_report) == _keys(local_report)
    assert [(r["case"], [t["status"] for t in r["trials"]]) for r in remote_report["runs"]] == [
        (r["case"], [t["status"] for t in r["trials"]]) for r in local_report["runs"]
    ]


def test_a_pass_rate_under_fail_under_exits_1(server: Server, project: Path, client_env):
    result = submit(
        project, client_env, "--server", server.url, "--token", server.token, "--fail-under", "1"
    )

    assert result.returncode == 1, result.stderr
    assert "Pass rate 50% is under --fail-under 100%" in result.stderr


def test_the_server_and_token_can_come_from_the_environment(server: Server, project, client_env):
    result = submit(
        project,
        client_env,
        "--json",
        "--case",
        "fix-total",
        PROCTOR_SERVER=server.url,
        PROCTOR_TOKEN=server.token,
    )

    assert result.returncode == 0, result.stderr
    assert [run["case"] for run in json.loads(result.stdout)["runs"]] == ["fix-total"]


def test_a_bad_token_is_one_line_and_records_nothing(server: Server, project, client_env):
    batches, bundles = server.batch_ids(), server.bundle_count()

    result = submit(project, client_env, "--server", server.url, "--token", "not-a-real-token")

    line = one_line(result)
    assert line.startswith(f"the server at {server.url} refused the token (Invalid token.)")
    assert (server.batch_ids(), server.bundle_count()) == (batches, bundles)


def test_a_missing_token_is_one_line(server: Server, project, client_env):
    line = one_line(submit(project, client_env, "--server", server.url))

    assert "PROCTOR_TOKEN" in line


def test_an_organization_the_user_is_not_in_is_one_line(server: Server, project, client_env):
    batches = server.batch_ids()

    for org in ("globex", "nope"):
        result = submit(
            project, client_env, "--server", server.url, "--token", server.token, "--org", org
        )
        assert (
            one_line(result)
            == f"the server at {server.url} answered: no organization {org} for this user"
        )
    assert server.batch_ids() == batches


def test_a_server_that_is_down_is_one_line(project, client_env):
    down = f"http://127.0.0.1:{free_port()}"

    line = one_line(submit(project, client_env, "--server", down, "--token", "t"))

    assert line.startswith(f"cannot reach the Proctor server at {down}: ")


def test_invalid_evals_are_refused_before_the_server_is_asked(project, client_env):
    (project / "shop.eval.py").write_text(
        'from proctor import case, suite\ns = suite("Bad Id", prompt="x", cases=[])\n'
    )
    down = f"http://127.0.0.1:{free_port()}"

    result = submit(project, client_env, "--server", down, "--token", "t")

    assert result.returncode == 2
    assert "cannot reach" not in result.stderr
    assert "shop.eval.py" in result.stderr


def test_a_bundle_over_the_servers_limit_is_one_line_and_records_no_batch(
    server: Server, project, client_env
):
    (project / "data.bin").write_bytes(os.urandom(2 * 1024 * 1024))  # incompressible
    batches, bundles = server.batch_ids(), server.bundle_count()

    result = submit(
        project,
        client_env,
        "--server",
        server.url,
        "--token",
        server.token,
        PROCTOR_BUNDLE_MAX_MB="10",
    )

    line = one_line(result)
    assert line.startswith(
        f"the server at {server.url} accepts bundles of at most 1.0 MB (its PROCTOR_BUNDLE_MAX_MB) "
        "and the bundle of shop.eval.py is 2.0 MB compressed"
    )
    assert (server.batch_ids(), server.bundle_count()) == (batches, bundles)


def test_the_worker_needs_none_of_the_submitters_files(server: Server, project, client_env):
    queued = submit(
        project, client_env, "--server", server.url, "--token", server.token, "--no-wait", "--json"
    )
    assert queued.returncode == 0, queued.stderr
    batch = json.loads(queued.stdout)
    assert batch["queued"] == 2

    shutil.rmtree(project)

    for _ in range(600):
        statuses = server.trial_statuses(batch["batch"])
        if all(
            s in ("passed", "failed", "errored", "timed_out") for v in statuses.values() for s in v
        ):
            break
        time.sleep(0.2)
    assert statuses == {"fix-total": ["passed"], "wrong-total": ["failed"]}


@pytest.mark.parametrize(
    ("stop", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"]
)
def test_a_stopped_wait_says_the_batch_goes_on_on_the_server(
    server: Server, project: Path, client_env, stop: signal.Signals, status: int
):
    # An agent that works a few seconds: the command is still waiting when it is stopped.
    agent = project / "agent" / "agent.sh"
    agent.write_text(AGENT.replace("#!/usr/bin/env bash\n", "#!/usr/bin/env bash\nsleep 3\n"))
    before = set(server.batch_ids())
    proc = subprocess.Popen(
        [PROCTOR, "eval", "--server", server.url, "--token", server.token],
        cwd=project,
        env=client_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        # SIGINT at its default whatever the runner has (a background job ignores it).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        for _ in range(600):
            if set(server.batch_ids()) - before:
                break
            time.sleep(0.1)
        (batch,) = set(server.batch_ids()) - before
        time.sleep(0.5)  # past the upload and the submission, into the wait
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    assert proc.returncode == status, err
    assert "Traceback" not in err
    assert (
        f"Stopped waiting: batch {batch} goes on on the server ({server.url}/batches/{batch}/)."
        in err
    )
    # And it does: the server's worker runs it to the end.
    for _ in range(600):
        statuses = server.trial_statuses(batch)
        if all(s in ("passed", "failed") for v in statuses.values() for s in v):
            break
        time.sleep(0.2)
    assert statuses == {"fix-total": ["passed"], "wrong-total": ["failed"]}


def test_adaptive_trials_run_on_the_server_too(server: Server, project: Path, client_env):
    result = submit(
        project,
        client_env,
        "--server",
        server.url,
        "--token",
        server.token,
        "--trials",
        "adaptive:7:9",
        "--json",
    )

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    # Both cases are unanimous: decided at the minimum on the server's worker, 2 + 2 saved.
    assert {r["case"]: len(r["trials"]) for r in report["runs"]} == {
        "fix-total": 7,
        "wrong-total": 7,
    }
    assert report["adaptive"]["saved"] == 4
