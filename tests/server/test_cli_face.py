"""The CLI face: `proctor --help` lists Proctor's own commands first, one line each, and Django's
apart; the first command a new user types works on a fresh machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import proctor_env, run_proctor

OWN_COMMANDS = [
    "eval",
    "serve",
    "worker",
    "compare",
    "regrade",
    "export",
    "harness list",
    "sandbox list",
    "import",
    "cases",
    "init",
    "createuser",
    "createtoken",
]


@pytest.mark.parametrize("spelling", [["--help"], ["help"], []])
def test_it_lists_proctors_commands_first_with_a_summary_each(tmp_path: Path, spelling) -> None:
    result = run_proctor(*spelling, cwd=tmp_path, env=proctor_env(tmp_path / "home"))

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    own_header = lines.index("Proctor's commands:")
    django_header = next(i for i, line in enumerate(lines) if line.startswith("Django's"))
    own_lines = lines[own_header + 1 : own_header + 1 + len(OWN_COMMANDS)]
    for command, line in zip(OWN_COMMANDS, own_lines, strict=True):
        assert line.strip().startswith(command + " "), line
        summary = line.strip()[len(command) :].strip()
        assert len(summary) > 15 and summary.endswith("."), line
    # Django's maintenance commands come after, by name only, and none of ours among them.
    maintenance = " ".join(lines[django_header + 1 :])
    assert "migrate" in maintenance and "collectstatic" in maintenance
    assert all(f" {c}," not in maintenance for c in ("eval", "serve", "worker", "createuser"))
    assert "migrate" not in "\n".join(lines[:django_header])


def test_a_commands_own_help_is_unchanged(tmp_path: Path) -> None:
    result = run_proctor("eval", "--help", cwd=tmp_path, env=proctor_env(tmp_path / "home"))

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: proctor eval")


def test_createuser_works_as_the_first_command_on_a_fresh_machine(tmp_path: Path) -> None:
    env = proctor_env(tmp_path / "home")

    result = run_proctor(
        "createuser",
        "alice",
        "--org",
        "acme",
        "--password",
        "a-long-password",
        "--staff",
        cwd=tmp_path,
        env=env,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "User alice created, member of acme (new organization). Sign in at /login/."
    )
    assert "Traceback" not in result.stderr


def test_createtoken_on_a_fresh_machine_says_there_is_no_such_user(tmp_path: Path) -> None:
    result = run_proctor("createtoken", "nobody", cwd=tmp_path, env=proctor_env(tmp_path / "home"))

    assert result.returncode == 1
    assert "There is no user named 'nobody'" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["--help"],
        ["harness", "list"],
        ["init", "--help"],
        ["compare", "--help"],
        ["eval", "--help"],
    ],
    ids=["--help", "harness list", "init --help", "compare --help", "eval --help"],
)
def test_a_command_that_records_nothing_leaves_no_proctor_folder(
    tmp_path: Path, command: list[str]
) -> None:
    """The default home is `.proctor` in the current folder: made by the first command that
    records something, not by every command typed there."""
    env = proctor_env(tmp_path)
    del env["PROCTOR_HOME"]  # the default: .proctor below the current folder
    result = run_proctor(*command, cwd=tmp_path, env=env)

    assert result.returncode == 0, result.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_first_command_that_records_makes_the_home_folders_it_needs(tmp_path: Path) -> None:
    home = tmp_path / "new" / "deeper" / "home"
    result = run_proctor("createtoken", "nobody", cwd=tmp_path, env=proctor_env(home))

    assert "no user named 'nobody'" in result.stderr
    assert (home / "proctor.sqlite3").is_file()
