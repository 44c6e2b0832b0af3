"""A sandbox kind from another package: the example in examples/sandbox-plugin, installed into
a folder on the path as pip installs it, is found through the ``proctor.sandboxes`` entry
point group (never imported by name), listed, and runs a trial; a plug-in that cannot be
loaded is one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.running import Backend, only_run, write_eval

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sandbox-plugin"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """The example package installed (pip, no index) into a folder of its own."""
    site = tmp_path_factory.mktemp("plugin-site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(site),
            str(EXAMPLE),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return site


def on_path(env: dict[str, str], *folders: Path) -> dict[str, str]:
    path = [str(folder) for folder in folders]
    if env.get("PYTHONPATH"):
        path.append(env["PYTHONPATH"])
    return {**env, "PYTHONPATH": os.pathsep.join(path)}


def broken_plugin(tmp_path: Path) -> Path:
    """An installed distribution whose entry point names a module that is not there."""
    site = tmp_path / "broken-site"
    info = site / "proctor_broken_sandbox-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: proctor-broken-sandbox\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(
        "[proctor.sandboxes]\nbroken = proctor_broken_missing:Kind\n"
    )
    return site


def test_an_installed_sandbox_kind_is_listed_with_its_options(
    sqlite_backend: Backend, tmp_path: Path, plugin_site: Path
) -> None:
    result = subprocess.run(
        [str(Path(sys.executable).with_name("proctor")), "sandbox", "list"],
        env=on_path(sqlite_backend.env, plugin_site, broken_plugin(tmp_path)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines()}
    assert "plug-in proctor_niced_sandbox; options: nice; no limits" in lines["niced"]
    assert "built in" in lines["e2b"] and "built in" in lines["docker"]
    assert lines["broken"].endswith(
        "not loaded: the sandbox plug-in 'broken' (proctor_broken_missing:Kind, from "
        "proctor-broken-sandbox) could not be loaded: ModuleNotFoundError: No module named "
        "'proctor_broken_missing'"
    ), lines["broken"]


def test_a_trial_runs_in_a_sandbox_kind_from_another_package(
    sqlite_backend: Backend, tmp_path: Path, plugin_site: Path
) -> None:
    write_eval(
        tmp_path,
        "niced.eval.py",
        """
        from proctor import case, command, profile, suite, variant

        finished = '{"_tag":"Finished","reason":"done"}'
        niced = variant("command", name="niced", sandbox="niced", nice=12,
                        profile=profile("p", run=f"nice > niceness.txt; echo '{finished}'"))
        s = suite("plugged", prompt="go", variants=[niced],
                  cases=[case("priority", validate=command("grep -qx 12 niceness.txt"))])
        """,
    )
    result = sqlite_backend.eval(
        tmp_path, "--json", extra_env=on_path(sqlite_backend.env, plugin_site)
    )
    report = json.loads(result.stdout)
    (trial,) = only_run(report, "priority")["trials"]
    assert trial["status"] == "passed", trial


def test_a_typo_in_a_plugin_option_and_a_broken_plugin_are_refused_at_load(
    sqlite_backend: Backend, tmp_path: Path, plugin_site: Path
) -> None:
    write_eval(
        tmp_path,
        "typo.eval.py",
        """
        from proctor import case, command, profile, suite, variant

        typo = variant("command", name="typo", sandbox="niced", nise=3,
                       profile=profile("p", run="true"))
        broken = variant("command", name="gone", sandbox="broken",
                         profile=profile("p", run="true"))
        s = suite("plugged", prompt="go", variants=[typo, broken],
                  cases=[case("c", validate=command("true"))])
        """,
    )
    env = on_path(sqlite_backend.env, plugin_site, broken_plugin(tmp_path))
    result = sqlite_backend.eval(tmp_path, extra_env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "unknown option nise for the niced sandbox" in result.stderr
    assert "did you mean nice?" in result.stderr
    gone = [line for line in result.stderr.splitlines() if "variant gone" in line]
    assert len(gone) == 1 and "could not be loaded: ModuleNotFoundError" in gone[0], gone
    assert "Traceback" not in result.stderr
