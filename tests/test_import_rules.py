"""The import rules in pyproject.toml ([tool.importlinter]) hold, and can fail.

``lint-imports`` runs in a subprocess from the venv, as ``make check`` runs it. The planted
violation runs it on a copy of the four packages, so the tree itself is never touched.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

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


def copy_of_the_tree(folder: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(
            REPO / package, folder / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(REPO / "pyproject.toml", folder / "pyproject.toml")
    return folder


def test_an_import_pointing_back_up_in_the_runner_breaks_its_contract(tmp_path: Path) -> None:
    tree = copy_of_the_tree(tmp_path)
    # Inside a function, where an import hides best.
    (tree / "runner" / "grading" / "_planted.py").write_text(
        "def later():\n    from runner.trial import execute\n"
    )

    result = lint_imports(tree, PYTHONPATH=str(tree))

    assert result.returncode != 0
    assert "runner's packages import only those below them BROKEN" in result.stdout
    assert "runner.grading._planted -> runner.trial.execute" in result.stdout


def test_a_django_import_planted_in_the_core_breaks_its_contract(tmp_path: Path) -> None:
    copy_of_the_tree(tmp_path)
    (tmp_path / "runner" / "core" / "_planted.py").write_text("import django\n")

    result = lint_imports(tmp_path, PYTHONPATH=str(tmp_path))

    assert result.returncode != 0
    assert (
        "runner.core and runner.trial import nothing of Django, Celery or Channels BROKEN"
        in result.stdout
    )
    assert "runner.core._planted -> django" in result.stdout


def test_the_core_and_the_model_client_load_without_django() -> None:
    # What the contracts promise, seen from a fresh interpreter: nothing imported lazily at
    # import time either.
    code = (
        "import sys, runner.trial.execute, runner.llm; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1:])))"
    )
    forbidden = contracts()[
        "runner.core and runner.trial import nothing of Django, Celery or Channels"
    ]["forbidden_modules"]

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

    # A package (proctor.site.backends) is wiring when a module of it is.
    not_wiring = sorted(
        module
        for module in left_out
        if not any(
            imported.split(".")[0] in DJANGO_AND_FRIENDS
            for part in {module} | graph.find_descendants(module)
            for imported in graph.find_modules_directly_imported_by(part)
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


# The web side: the ASGI server (daphne, Twisted), the REST framework and its schema, the admin,
# the dashboard. `proctor eval` shows none of it, and loading it was most of its start-up.
WEB_STACK = (
    "daphne",
    "twisted",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django.contrib.admin",
    "dashboard",
)
# Runs the `proctor` entry point as the installed script does, then writes the names of every
# module it imported to the file named by its first argument.
IMPORTED_BY_PROCTOR = """
import json, runpy, sys
out, sys.argv = sys.argv[1], ["proctor", *sys.argv[2:]]
try:
    runpy.run_module("proctor.site.cli", run_name="__main__")
finally:
    with open(out, "w") as f:
        json.dump(sorted(sys.modules), f)
"""


def modules_imported_by_proctor(tmp_path: Path, *args: str) -> tuple[int, set[str]]:
    listing = tmp_path / "modules.json"
    result = subprocess.run(
        [sys.executable, "-c", IMPORTED_BY_PROCTOR, str(listing), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PROCTOR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)},
        timeout=60,
    )
    assert listing.exists(), result.stderr[-2000:]
    return result.returncode, set(json.loads(listing.read_text()))


def web_modules(imported: set[str]) -> list[str]:
    return sorted(
        name
        for name in imported
        if any(name == web or name.startswith(web + ".") for web in WEB_STACK)
    )


def test_proctor_eval_starts_without_the_web_stack(tmp_path):
    """`proctor eval` is a command-line tool: it loads neither the ASGI server (daphne and
    Twisted) nor the REST framework nor the admin nor the dashboard, so it starts fast."""
    code, imported = modules_imported_by_proctor(tmp_path, "eval", str(tmp_path / "none"))

    assert code == 2  # the missing path, said in one line, after the command loaded
    assert "runner.management.commands.eval" in imported
    assert web_modules(imported) == []


@pytest.mark.parametrize("spelling", [["eval", "--help"], ["eval", "-h"], ["help", "eval"]])
def test_proctor_eval_help_loads_neither_the_web_stack_nor_the_apps(tmp_path, spelling):
    """The help is printed from the command's options alone: no app is loaded for it."""
    code, imported = modules_imported_by_proctor(tmp_path, *spelling)

    assert code == 0
    assert web_modules(imported) == []
    assert "evals_app.models" not in imported and "runner.harnesses" not in imported


def test_the_web_side_still_loads_the_whole_stack(tmp_path):
    """What `proctor eval` leaves out, every other command (serve, createuser, ...) keeps."""
    code, imported = modules_imported_by_proctor(tmp_path, "check")

    assert code == 0
    assert {"django.contrib.admin", "rest_framework", "drf_spectacular", "dashboard"} <= imported


def test_no_module_of_the_project_imports_itself_back():
    graph = grimp.build_graph(*PACKAGES)
    modules = {m for m in graph.modules if m.split(".")[0] in PACKAGES}
    cycles = [
        (module, imported)
        for module in sorted(modules)
        for imported in sorted(graph.find_modules_directly_imported_by(module) & modules)
        if graph.chain_exists(importer=imported, imported=module)
    ]
    assert cycles == [], "each pair imports the other, directly or through others"


def own_imports_inside_functions(path: Path) -> list[tuple[int, list[str]]]:
    """(line, the lines above it) of each import of the project's own modules inside a
    function of ``path``."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.ImportFrom) and inner.module:
                names = [inner.module]
            elif isinstance(inner, ast.Import):
                names = [alias.name for alias in inner.names]
            else:
                continue
            if any(name.split(".")[0] in PACKAGES for name in names):
                found.append((inner.lineno, lines[: inner.lineno]))
    return found


def says_why(lines: list[str]) -> bool:
    """Whether the import on the last of ``lines`` has a comment: on its line, or above the
    block of imports it belongs to."""
    if "#" in lines[-1]:
        return True
    for line in reversed(lines[:-1]):
        stripped = line.strip()
        if stripped.startswith("#"):
            return True
        if not stripped.startswith(("from ", "import ")):
            return False
    return False


def test_a_function_level_import_of_the_projects_own_modules_says_why():
    unexplained = [
        f"{path.relative_to(REPO)}:{line}"
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        if "migrations" not in path.parts
        for line, above in own_imports_inside_functions(path)
        if not says_why(above)
    ]
    assert unexplained == []
