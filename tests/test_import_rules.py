"""The import rules in pyproject.toml ([tool.importlinter]) hold, and can fail.

``lint-imports`` runs in a subprocess from the venv, as ``make check`` runs it. The planted
violation runs it on a copy of the four packages, so the tree itself is never touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
PACKAGES = ("proctor", "evals_app", "runner", "dashboard")
DJANGO_AND_FRIENDS = ("django", "celery", "channels")


def contracts() -> dict[str, dict]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    return {c["name"]: c for c in config["tool"]["importlinter"]["contracts"]}


SDK_CONTRACT = contracts()["the SDK imports nothing of Django"]


def lint_imports(cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_tree_keeps_every_contract() -> None:
    result = lint_imports(REPO)

    assert result.returncode == 0, result.stdout + result.stderr
    for name in contracts():
        assert f"{name} KEPT" in result.stdout


def test_a_django_import_planted_in_the_core_breaks_its_contract(tmp_path: Path) -> None:
    for package in PACKAGES:
        shutil.copytree(
            REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "runner" / "core" / "_planted.py").write_text("import django\n")

    result = lint_imports(tmp_path, PYTHONPATH=str(tmp_path))

    assert result.returncode != 0
    assert "runner.core imports nothing of Django, Celery or Channels BROKEN" in result.stdout
    assert "runner.core._planted -> django" in result.stdout


def test_the_core_and_the_model_client_load_without_django() -> None:
    # What the contracts promise, seen from a fresh interpreter: nothing imported lazily at
    # import time either.
    code = (
        "import sys, runner.core.trial, runner.llm; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1:])))"
    )
    forbidden = contracts()["runner.core imports nothing of Django, Celery or Channels"][
        "forbidden_modules"
    ]

    result = subprocess.run(
        [sys.executable, "-c", code, *forbidden],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_every_proctor_module_outside_the_sdk_contract_is_django_wiring() -> None:
    # The SDK contract lists its modules one by one, so that the Django wiring beside them
    # (settings, urls, asgi, celery, ...) may import Django. A new SDK module must join the
    # list; this catches one that did not.
    sdk = set(SDK_CONTRACT["source_modules"])
    graph = grimp.build_graph("proctor", include_external_packages=True)
    left_out = graph.find_children("proctor") - sdk

    not_wiring = sorted(
        module
        for module in left_out
        if not any(
            imported.split(".")[0] in DJANGO_AND_FRIENDS
            for imported in graph.find_modules_directly_imported_by(module)
        )
    )
    assert not_wiring == [], (
        f"{', '.join(not_wiring)} import nothing of Django: add them to the SDK contract's "
        "source_modules in pyproject.toml"
    )


def test_the_public_face_imports_only_sdk_modules() -> None:
    # ``proctor/__init__.py`` cannot be a source of the SDK contract without its whole package
    # (the wiring included), so its own imports are checked here.
    sdk = set(SDK_CONTRACT["source_modules"])
    forbidden = set(SDK_CONTRACT["forbidden_modules"])
    graph = grimp.build_graph("proctor", include_external_packages=True)

    outside = sorted(
        module
        for module in graph.find_modules_directly_imported_by("proctor")
        if module.split(".")[0] in forbidden
        or (module.startswith("proctor.") and module not in sdk)
    )
    assert outside == []


def test_proctor_eval_starts_without_the_web_stack(tmp_path):
    """`proctor eval` is a command-line tool: it loads neither the ASGI server (daphne and
    Twisted) nor the REST framework's views nor the dashboard, so it starts fast."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "proctor.cli", "eval", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PROCTOR_HOME": str(tmp_path / "home")},
        timeout=60,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    imported = {
        line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "|" in line
    }
    web = sorted(
        name
        for name in imported
        if name.split(".")[0] in ("daphne", "twisted", "dashboard")
        or name.startswith(("rest_framework.views", "drf_spectacular.views"))
    )
    assert web == []
