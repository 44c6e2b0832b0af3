"""Running the real `proctor eval` in a folder of eval files, and reading what it stored.

A Backend is one database a `proctor` subprocess records into (the embedded SQLite file under
PROCTOR_HOME, or PostgreSQL through DATABASE_URL), read back here with plain SQL so the tests
see exactly what a person's database holds.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import PROCTOR

AGENTS = Path(__file__).resolve().parent / "agents"
# The tables that hold what Proctor recorded (suites to checks).
PROJECT_TABLE_PREFIXES = ("evals_app_",)


def write_eval(folder: Path, name: str, text: str) -> Path:
    """Write ``name`` (``*.eval.py``) into ``folder``, dedented."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def write_quick_eval(folder: Path, *, trials: int = 1) -> Path:
    """``quick.eval.py`` in ``folder``: one case of ``trials`` trials whose agent only prints
    that it finished and whose check is ``true``, a whole trial at the least cost."""
    return write_eval(
        folder,
        "quick.eval.py",
        f"""
        from proctor import case, command, profile, suite, variant

        s = suite("quick", prompt="work", trials={trials},
                  cases=[case("noop", validate=command("true"))],
                  variants=[variant("command", profile=profile("noop",
                      run="echo '{{\\"_tag\\":\\"Finished\\",\\"reason\\":\\"done\\"}}'"))])
        """,
    )


def agent_profile(script: str, *, name: str | None = None, **fields: str) -> str:
    """Python source of a ``profile(...)`` that runs ``script`` from the shipped agents folder."""
    runner = "bash" if script.endswith(".sh") else "python3"
    extra = "".join(f", {key}={value}" for key, value in fields.items())
    return (
        f"profile({(name or script.split('.')[0].replace('_', '-'))!r}, dir={str(AGENTS)!r}, "
        f"run='{runner} \"$PROCTOR_PROFILE_DIR/{script}\"'{extra})"
    )


class ProctorHung(Exception):
    """A `proctor` command did not finish in time; the message holds its threads' stacks."""


def run_hang_aware(
    argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float, stdin: str | None = None
) -> subprocess.CompletedProcess:
    """Run a command; when it hangs, make Python dump every thread's stack (faulthandler on
    SIGABRT) and raise ProctorHung with that dump, so a hang explains itself."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env={**env, "PYTHONFAULTHANDLER": "1"},
        text=True,
        stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        stdout, stderr = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        raise ProctorHung(
            f"{' '.join(argv[1:])} did not finish in {timeout:.0f}s; its stacks:\n{stderr[-30000:]}"
        ) from None
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


@dataclass
class Backend:
    kind: str  # "sqlite" | "postgres"
    env: dict[str, str]

    @property
    def home(self) -> Path:
        return Path(self.env["PROCTOR_HOME"])

    @property
    def artifacts(self) -> Path:
        return self.home / "artifacts"

    @property
    def sqlite_path(self) -> Path:
        return self.home / "proctor.sqlite3"

    def eval(
        self,
        cwd: Path,
        *args: str,
        stdin: str | None = None,
        extra_env: dict[str, str] | None = None,
        timeout: float = 300,
    ) -> subprocess.CompletedProcess:
        """Run ``proctor eval``; ``stdin`` is fed to it (default: no input at all)."""
        return run_hang_aware(
            [PROCTOR, "eval", *args],
            cwd=cwd,
            env={**self.env, **(extra_env or {})},
            timeout=timeout,
            stdin=stdin,
        )

    def eval_json(self, cwd: Path, *args: str, timeout: float = 300) -> dict[str, Any]:
        """Run ``proctor eval --json``; fails the test unless it exits 0 with only JSON on stdout."""
        result = self.eval(cwd, "--json", *args, timeout=timeout)
        assert result.returncode == 0, (
            f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
        )
        return json.loads(result.stdout)

    # --- reading the database ------------------------------------------------------------------

    def _connect(self):
        if self.kind == "sqlite":
            return sqlite3.connect(self.sqlite_path)
        import psycopg

        return psycopg.connect(self.env["DATABASE_URL"], autocommit=True)

    def exists(self) -> bool:
        return self.kind == "postgres" or self.sqlite_path.exists()

    def rows(self, sql: str, *params: Any) -> list[tuple]:
        if self.kind == "postgres":
            sql = sql.replace("?", "%s")
        conn = self._connect()
        try:
            return [tuple(row) for row in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    def scalar(self, sql: str, *params: Any) -> Any:
        rows = self.rows(sql, *params)
        return rows[0][0] if rows else None

    def tables(self) -> list[str]:
        if not self.exists():
            return []
        if self.kind == "sqlite":
            sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        else:
            sql = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        return sorted(name for (name,) in self.rows(sql))

    def counts(self) -> dict[str, int]:
        """Rows per table, for every table of the database (none when it does not exist yet)."""
        return {table: self.scalar(f'SELECT COUNT(*) FROM "{table}"') for table in self.tables()}

    def all_text(self) -> str:
        """Every value of every row of every table, as text: where a leaked secret would show."""
        parts = []
        for table in self.tables():
            for row in self.rows(f'SELECT * FROM "{table}"'):
                parts.extend(str(value) for value in row)
        return "\n".join(parts)

    def json_value(self, value: Any) -> Any:
        """A JSON column's value: text on SQLite, already decoded by psycopg."""
        return json.loads(value) if isinstance(value, str) else value

    def events(self, trial_id: int) -> list[tuple[str, dict[str, Any]]]:
        return [
            (kind, self.json_value(data))
            for kind, data in self.rows(
                "SELECT kind, data FROM evals_app_event WHERE trial_id = ? ORDER BY seq", trial_id
            )
        ]

    def trial_ids(self, batch: int, case: str | None = None) -> list[int]:
        sql = (
            "SELECT t.id FROM evals_app_trial t JOIN evals_app_run r ON t.run_id = r.id "
            "JOIN evals_app_caseversion v ON r.case_version_id = v.id JOIN evals_app_case c ON v.case_id = c.id "
            "WHERE r.batch_id = ?"
        )
        params: list[Any] = [batch]
        if case is not None:
            sql += " AND c.slug = ?"
            params.append(case)
        return [trial_id for (trial_id,) in self.rows(sql + ' ORDER BY r.id, t."index"', *params)]


def trial_folder(backend: Backend, batch: int, trial_id: int) -> Path:
    return backend.artifacts / "batches" / str(batch) / "trials" / str(trial_id)


def only_run(report: dict[str, Any], case: str) -> dict[str, Any]:
    runs = [run for run in report["runs"] if run["case"] == case]
    assert len(runs) == 1, f"expected one run of {case}, got {runs}"
    return runs[0]
