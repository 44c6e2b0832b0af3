"""Fixtures of the importer tests: a fake model endpoint that writes personas, loading a
generated eval file the way `proctor eval` does, and the real `proctor` command."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import proctor_env, run_proctor
from e2e.running import Backend
from fakes.openai_server import FakeModelServer, fake_model_server_fixture  # noqa: F401

from evals_app.loading import load_file
from proctor.definitions import Suite
from proctor.rules import suite_problems
from runner.harnesses import HARNESSES
from runner.sandboxes import SANDBOX_KINDS

RUFF = str(Path(sys.executable).with_name("ruff"))
PROJECT = Path(__file__).resolve().parents[2]


def load_valid_suites(path: Path) -> dict[str, Suite]:
    """The file's suites by id, after checking them by `proctor eval`'s rules."""
    suites = load_file(path).suites
    problems = [
        str(p)
        for s in suites
        for p in suite_problems(
            s, str(path), known_harnesses=HARNESSES, known_sandboxes=SANDBOX_KINDS
        )
    ]
    assert problems == []
    return {s.id: s for s in suites}


def ruff_problems(path: Path) -> str:
    """What ruff (with the project's rules) finds in a generated file; empty when clean."""
    result = subprocess.run(
        [RUFF, "check", "--no-cache", "--config", str(PROJECT / "pyproject.toml"), str(path)],
        capture_output=True,
        text=True,
    )
    return "" if result.returncode == 0 else result.stdout + result.stderr


@dataclass
class Proctor:
    """The real `proctor` command in a folder, with its own home."""

    cwd: Path
    env: dict[str, str]

    def __call__(self, *args: str) -> subprocess.CompletedProcess:
        return run_proctor(*args, cwd=self.cwd, env=self.env, timeout=120)


@pytest.fixture
def proctor(tmp_path: Path) -> Proctor:
    work = tmp_path / "work"
    work.mkdir()
    env = proctor_env(tmp_path / "proctor-home")
    for name in (
        "PROCTOR_LLM_BASE_URL",
        "PROCTOR_LLM_MODEL",
        "PROCTOR_LLM_COMMAND",
        "PROCTOR_LLM_API_KEY",
    ):
        env.pop(name, None)
    return Proctor(work, env)


def import_and_run(
    proctor: Proctor, server: FakeModelServer, *, config: str = "promptfooconfig.yaml"
) -> tuple[subprocess.CompletedProcess, dict]:
    """`proctor import promptfoo CONFIG`, then `proctor eval --json` on the file it wrote with
    ``server`` as the project's model endpoint: (the import's run, the eval's report)."""
    imported = proctor("import", "promptfoo", config)
    assert imported.returncode == 0, imported.stderr
    backend = Backend(
        "sqlite",
        proctor_env(
            proctor.cwd.parent / "eval-home",
            PROCTOR_LLM_BASE_URL=server.url,
            PROCTOR_LLM_MODEL="fake-persona",
        ),
    )
    written = config.removesuffix(".yaml").removesuffix(".yml").removesuffix(".json")
    return imported, backend.eval_json(proctor.cwd, f"{written}.eval.py")
