"""Record once, run what was recorded: the eval file a stranger writes first finds its agent, its
check script, its data and its helpers from ``Path(__file__)``, takes a model and a token from
the environment, and makes its cases from a JSON file. It passes on its first run, again with
no new version, and on reruns that a `proctor serve` without those variables starts from the
API, after the project moved and after it was deleted. The token it reads is stored nowhere:
no table, artifact, API answer or page holds its text."""

from __future__ import annotations

import http.cookiejar
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import PROCTOR, free_port, run_proctor

from e2e.running import Backend, write_eval

MODEL = "model-from-the-environment"
TOKEN = "tok-3f9a7c1e5b2d4a6f"
PASSWORD = "correct-horse-battery"

STRANGER_EVAL = """
import json
import os
from pathlib import Path

from helpers import greeted

from proctor import Verdict, case, command, profile, suite, variant

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MODEL = os.environ.get("STRANGER_MODEL", "no-model-set")
API_TOKEN = os.environ.get("STRANGER_API_TOKEN", "")
# A data file read at import.
GREETING = (HERE / "data" / "greeting.txt").read_text().strip()


def token_reached_the_agent(ctx):
    # Reads a module-level secret: only its digest may be recorded.
    return Verdict(
        bool(API_TOKEN) and ctx.read_text("token.txt").strip() == str(len(API_TOKEN)),
        "the agent had the token",
    )


agent = profile(
    "py",
    dir=str(ROOT / "profile"),
    run=f"python3 {ROOT / 'agent' / 'agent.py'}",
    env={"STRANGER_API_TOKEN": API_TOKEN},
)

stranger = suite(
    "stranger",
    prompt="{{name}}",
    cases=[
        case(
            entry["id"],
            variables={"name": entry["name"]},
            validate=[greeted(GREETING, entry["name"]), token_reached_the_agent],
        )
        for entry in json.loads((HERE / "cases.json").read_text())
    ]
    + [
        case(
            "greet-cy",
            variables={"name": "Cy"},
            validate=command(f"bash {HERE / 'check.sh'} Cy"),
        )
    ],
    variants=[variant("command", model=MODEL, profile=agent)],
)
"""

HELPERS = """
def greeted(greeting, name):
    def check(ctx):
        return ctx.read_text("greeting.txt").strip() == f"{greeting}, {name}"

    check.__name__ = f"greeted_{name.lower()}"
    return check
"""

AGENT = """
import json, os, pathlib, sys

prompt = os.environ["SPHYNX_PROMPT"]
style = (pathlib.Path(os.environ["PROCTOR_PROFILE_DIR"]) / "style.txt").read_text().strip()
pathlib.Path("greeting.txt").write_text(f"{style}, {prompt}\\n")
pathlib.Path("model.txt").write_text(os.environ["SPHYNX_MODEL"] + "\\n")
pathlib.Path("token.txt").write_text(str(len(os.environ.get("STRANGER_API_TOKEN", ""))) + "\\n")
print(json.dumps({"_tag": "Started", "sessionId": "s1", "model": os.environ["SPHYNX_MODEL"]}))
print(json.dumps({"_tag": "Message", "role": "assistant", "text": "Greeted " + prompt}))
print(json.dumps({"_tag": "Finished", "reason": "done"}))
"""

CHECK = """
grep -qx "Hello, $1" greeting.txt && grep -qx "$STRANGER_EXPECTED_MODEL" model.txt
"""


def write_project(root: Path) -> Path:
    (root / "evals" / "data").mkdir(parents=True)
    (root / "agent").mkdir()
    (root / "profile").mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "stranger"\n')
    (root / "evals" / "data" / "greeting.txt").write_text("Hello\n")
    (root / "evals" / "cases.json").write_text(
        json.dumps([{"id": "greet-ada", "name": "Ada"}, {"id": "greet-bob", "name": "Bob"}])
    )
    (root / "evals" / "helpers.py").write_text(HELPERS)
    (root / "evals" / "check.sh").write_text(CHECK.replace("$STRANGER_EXPECTED_MODEL", MODEL))
    (root / "agent" / "agent.py").write_text(AGENT)
    (root / "profile" / "style.txt").write_text("Hello\n")
    write_eval(root / "evals", "stranger.eval.py", STRANGER_EVAL)
    return root


def submitter_env(backend: Backend) -> dict[str, str]:
    return {**backend.env, "STRANGER_MODEL": MODEL, "STRANGER_API_TOKEN": TOKEN}


def first_eval(backend: Backend, project: Path) -> dict:
    result = backend.eval(project, "--json", extra_env=submitter_env(backend))
    assert result.returncode == 0, f"stdout: {result.stdout}\nstderr: {result.stderr}"
    return json.loads(result.stdout)


def trial_outcomes(report: dict) -> list[tuple[str, int, str, str, str]]:
    """(case, version, variant, status, error) of every trial of the report."""
    return sorted(
        (run["case"], run["case_version"], run["variant"], t["status"], t["error"])
        for run in report["runs"]
        for t in run["trials"]
    )


PASSED = [
    ("greet-ada", 1, f"command:py:{MODEL}", "passed", ""),
    ("greet-bob", 1, f"command:py:{MODEL}", "passed", ""),
    ("greet-cy", 1, f"command:py:{MODEL}", "passed", ""),
]


class Serve:
    """`proctor serve` started with the backend's settings and ``extra_env`` only (never
    STRANGER_MODEL), in another current folder, with a token for the API and a signed-in
    session for the pages."""

    def __init__(self, backend: Backend, cwd: Path, extra_env: dict[str, str]) -> None:
        self.backend = backend
        cwd.mkdir(parents=True, exist_ok=True)
        env = {**backend.env, **extra_env}
        created = run_proctor(
            "createuser", "alice", "--org", "default", "--password", PASSWORD, cwd=cwd, env=env
        )
        assert created.returncode == 0, created.stderr
        made = run_proctor("createtoken", "alice", cwd=cwd, env=env)
        assert made.returncode == 0, made.stderr
        self.token = made.stdout.strip().split()[-1]
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = cwd / "serve.log"
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [PROCTOR, "serve", self.url.removeprefix("http://")],
                cwd=cwd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self._wait_until_serving()

    def page(self, path: str) -> str:
        """A page as alice sees it, signed in through the sign-in form."""
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        opener.open(self.url + "/login/", timeout=30).read()
        csrf = next(c.value for c in jar if c.name == "csrftoken")
        form = urllib.parse.urlencode(
            {"username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": csrf}
        )
        signed_in = urllib.request.Request(
            self.url + "/login/", data=form.encode(), headers={"Referer": self.url + "/login/"}
        )
        opener.open(signed_in, timeout=30).read()
        with opener.open(self.url + path, timeout=30) as response:
            assert response.url.endswith(path), f"{path} led to {response.url}"
            return response.read().decode()

    def _wait_until_serving(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()
            try:
                self.get("/api/batches/")
                return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"proctor serve did not answer:\n{self.log.read_text()}")

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, str]:
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={
                "Authorization": f"Token {self.token}",
                "Content-Type": "application/json",
                "Accept": "application/json, text/html",
            },
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()

    def get(self, path: str) -> str:
        return self.request("GET", path)[1]

    def rerun(self, batch: int) -> dict:
        """Rerun ``batch`` through the API and wait for the new batch; its trials' outcomes."""
        status, body = self.request("POST", f"/api/batches/{batch}/rerun/", {"scope": "all"})
        assert status == 201, body
        new = json.loads(body)["id"]
        deadline = time.monotonic() + 120
        while json.loads(self.get(f"/api/batches/{new}/"))["status"] != "finished":
            assert time.monotonic() < deadline, self.log.read_text()[-3000:]
            time.sleep(0.2)
        return json.loads(self.get(f"/api/batches/{new}/report/"))

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def serve(backend: Backend, tmp_path: Path) -> Iterator[Callable[..., Serve]]:
    started: list[Serve] = []

    def start(**extra_env: str) -> Serve:
        server = Serve(backend, tmp_path / f"server-{len(started)}", extra_env)
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


def test_an_eval_built_from_its_own_location_passes_first_again_and_on_reruns_anywhere(
    backend: Backend, tmp_path: Path, serve
):
    project = write_project(tmp_path / "project")
    # The server has the token (its workers run the agent) but not STRANGER_MODEL.
    server = serve(STRANGER_API_TOKEN=TOKEN)

    first = first_eval(backend, project)
    assert trial_outcomes(first) == PASSED
    again = first_eval(backend, project)
    assert trial_outcomes(again) == PASSED, "no new version on the second run"
    assert backend.scalar("SELECT COUNT(*) FROM evals_app_caseversion") == 3

    # It runs the variant as recorded, not with the model its own environment would give.
    assert trial_outcomes(server.rerun(first["batch"])) == PASSED

    moved = tmp_path / "moved" / "project"
    moved.parent.mkdir()
    shutil.move(project, moved)
    assert trial_outcomes(server.rerun(first["batch"])) == PASSED
    assert trial_outcomes(first_eval(backend, moved)) == PASSED, "moving makes no new version"
    assert backend.scalar("SELECT COUNT(*) FROM evals_app_caseversion") == 3

    shutil.rmtree(moved)
    shutil.rmtree(backend.home / "cache" / "bundles")
    assert trial_outcomes(server.rerun(first["batch"])) == PASSED


def test_the_token_an_eval_reads_is_stored_nowhere_and_a_worker_without_it_says_so(
    backend: Backend, tmp_path: Path, serve
):
    project = write_project(tmp_path / "project")
    report = first_eval(backend, project)
    assert trial_outcomes(report) == PASSED
    trials = [t["id"] for run in report["runs"] for t in run["trials"]]
    run_id = report["runs"][0]["run_id"]
    version = backend.scalar("SELECT id FROM evals_app_caseversion ORDER BY id LIMIT 1")
    case = backend.scalar("SELECT case_id FROM evals_app_caseversion WHERE id = ?", version)
    variant = backend.scalar("SELECT id FROM evals_app_variant")
    server = serve()  # no token in its environment

    assert TOKEN not in backend.all_text()
    for file in backend.artifacts.rglob("*"):
        if file.is_file():
            assert TOKEN.encode() not in file.read_bytes(), file
    answers = {
        path: server.get(path)
        for path in (
            f"/api/batches/{report['batch']}/",
            f"/api/batches/{report['batch']}/report/",
            f"/api/runs/{run_id}/",
            f"/api/trials/{trials[0]}/",
            f"/api/trials/?batch={report['batch']}",
            f"/api/cases/{case}/",
            f"/api/case-versions/{version}/",
            f"/api/variants/{variant}/",
        )
    }
    answers.update(
        (path, server.page(path))
        for path in (
            f"/batches/{report['batch']}/",
            f"/runs/{run_id}/",
            f"/trials/{trials[0]}/",
            f"/cases/{case}/",
        )
    )
    assert [path for path, answer in answers.items() if TOKEN in answer] == []
    assert "token_reached_the_agent" in answers[f"/trials/{trials[0]}/"]
    # What the check reads is recorded by name, its value as a digest.
    definition = backend.json_value(
        backend.scalar("SELECT definition FROM evals_app_caseversion WHERE id = ?", version)
    )
    (token_check,) = [c for c in definition["checks"] if c["name"] == "token_reached_the_agent"]
    assert set(token_check["reads"]["API_TOKEN"]) == {"sha256"}
    # The profile's env names the variable the token came from; the agent by its project path.
    spec = backend.json_value(backend.scalar("SELECT spec FROM evals_app_variant"))
    assert spec["profile"]["env"] == {"STRANGER_API_TOKEN": "${STRANGER_API_TOKEN}"}
    assert spec["profile"]["run"] == "python3 ${PROCTOR_PROJECT}/agent/agent.py"

    # A rerun where the eval computes another token: each trial errors in one line naming the
    # value, before any agent starts.
    rerun = server.rerun(report["batch"])
    outcomes = [
        (t["status"], t["error"])
        for run in rerun["runs"]
        for t in run["trials"]
        if run["case"] != "greet-cy"
    ]
    assert len(outcomes) == 2
    for status, error in outcomes:
        assert status == "errored"
        assert "token_reached_the_agent" in error and "reads API_TOKEN" in error, error
        assert "\n" not in error
    rerun_trials = [
        t["id"] for run in rerun["runs"] for t in run["trials"] if run["case"] != "greet-cy"
    ]
    assert not any(backend.events(trial) for trial in rerun_trials), "no agent ran"


def test_a_path_outside_the_project_is_kept_as_written_and_said_once(
    sqlite_backend: Backend, tmp_path: Path
):
    outside = tmp_path / "shared-data"
    outside.mkdir()
    (outside / "greeting.txt").write_text("Hello\n")
    project = tmp_path / "project"
    (project / "evals").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "outside"\n')
    write_eval(
        project / "evals",
        "outside.eval.py",
        f"""
        from proctor import case, command, profile, suite, variant

        DATA = {str(outside)!r}
        agent = profile("cp", run=f"cp {{DATA}}/greeting.txt out.txt && echo '{{{{\\"_tag\\":\\"Finished\\",\\"reason\\":\\"done\\"}}}}'")
        outside = suite(
            "outside",
            prompt="copy",
            cases=[case(f"copies-{{n}}", validate=command(f"cmp out.txt {{DATA}}/greeting.txt"))
                   for n in (1, 2)],
            variants=[variant("command", profile=agent)],
        )
        """,
    )
    result = sqlite_backend.eval(project, "--json")

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [t["status"] for run in report["runs"] for t in run["trials"]] == ["passed"] * 2
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    # Both cases and the variant name it: said once, for the first that does.
    assert warnings == [
        f"warning: evals/outside.eval.py: case copies-1 names {outside}/greeting.txt, outside "
        f"the project ({project}): it is recorded as written, so a rerun on another machine, "
        "or after it moves, needs it at that path"
    ]
