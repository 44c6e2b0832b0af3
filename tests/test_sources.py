"""Sources: a case's workspace starts from the files or the repository it names."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from proctor.definitions import Files, Repo
from runner.workspace import sources
from runner.workspace.sources import SourceError, materialize, resolve_repo_url

GIT_HOST = "https://github.com"


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Alice",
        "GIT_AUTHOR_EMAIL": "alice@example.com",
        "GIT_COMMITTER_NAME": "Alice",
        "GIT_COMMITTER_EMAIL": "alice@example.com",
    }
    result = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def commit_file(repo: Path, name: str, text: str, message: str) -> str:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "--quiet", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    """A repository with two commits on main; the first is tagged v1."""
    repo = tmp_path / "upstream"
    repo.mkdir()
    git(repo, "init", "--quiet", "-b", "main")
    commit_file(repo, "app.py", "VERSION = 1\n", "first")
    git(repo, "tag", "v1")
    commit_file(repo, "app.py", "VERSION = 2\n", "second")
    return repo


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def new_workspace(tmp_path: Path, name: str = "workspace") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    return folder


def checkout(source: Repo, dest: Path, cache_dir: Path) -> None:
    materialize(source, dest, cache_dir=cache_dir, git_host=GIT_HOST)


# --- repositories ----------------------------------------------------------------------------


def test_it_checks_out_the_default_branch_when_no_ref_is_given(tmp_path, upstream, cache_dir):
    workspace = new_workspace(tmp_path)

    checkout(Repo(str(upstream)), workspace, cache_dir)

    assert (workspace / "app.py").read_text() == "VERSION = 2\n"
    assert git(workspace, "rev-parse", "HEAD") == git(upstream, "rev-parse", "HEAD")
    assert git(workspace, "remote", "get-url", "origin") == str(upstream)
    assert git(workspace, "status", "--porcelain") == ""


def test_it_checks_out_a_tag(tmp_path, upstream, cache_dir):
    workspace = new_workspace(tmp_path)

    checkout(Repo(str(upstream), ref="v1"), workspace, cache_dir)

    assert (workspace / "app.py").read_text() == "VERSION = 1\n"
    assert git(workspace, "rev-parse", "HEAD") == git(upstream, "rev-parse", "v1^{commit}")


@pytest.mark.parametrize("length", [7, 40])
def test_it_checks_out_a_commit_by_short_or_full_sha(tmp_path, upstream, cache_dir, length):
    first = git(upstream, "rev-parse", "HEAD~1")
    workspace = new_workspace(tmp_path)

    checkout(Repo(str(upstream), ref=first[:length]), workspace, cache_dir)

    assert git(workspace, "rev-parse", "HEAD") == first
    assert (workspace / "app.py").read_text() == "VERSION = 1\n"


def test_a_validator_can_see_the_agents_changes_with_git_diff(tmp_path, upstream, cache_dir):
    workspace = new_workspace(tmp_path)
    checkout(Repo(str(upstream), ref="v1"), workspace, cache_dir)

    (workspace / "app.py").write_text("VERSION = 3\n")

    diff = git(workspace, "diff")
    assert "-VERSION = 1" in diff
    assert "+VERSION = 3" in diff


def test_it_names_an_unknown_ref_and_the_repository(tmp_path, upstream, cache_dir):
    with pytest.raises(SourceError) as raised:
        checkout(Repo(str(upstream), ref="8f31c4a"), new_workspace(tmp_path), cache_dir)

    assert str(raised.value) == f"ref 8f31c4a does not exist in {upstream}"


def test_it_explains_why_a_repository_could_not_be_cloned(tmp_path, cache_dir):
    missing = tmp_path / "no-such-repo"

    with pytest.raises(SourceError) as raised:
        checkout(Repo(str(missing)), new_workspace(tmp_path), cache_dir)

    message = str(raised.value)
    assert message.startswith(f"could not clone {missing}: ")
    assert "does not exist" in message
    assert "\n" not in message


def test_it_rejects_a_ref_that_looks_like_an_option(tmp_path, upstream, cache_dir):
    with pytest.raises(SourceError, match="is not a valid git ref"):
        checkout(Repo(str(upstream), ref="--upload-pack=touch"), new_workspace(tmp_path), cache_dir)


def test_it_clones_a_repository_once_for_many_workspaces(tmp_path, upstream, cache_dir):
    clones, fetches = sources.activity.clones, sources.activity.fetches

    for trial in range(5):
        workspace = new_workspace(tmp_path, f"trial-{trial}")
        checkout(Repo(str(upstream), ref="v1"), workspace, cache_dir)
        assert (workspace / "app.py").read_text() == "VERSION = 1\n"

    assert sources.activity.clones - clones == 1
    assert sources.activity.fetches - fetches == 0
    assert len(list((cache_dir / "repos").glob("*.git"))) == 1


def test_it_fetches_when_the_cached_mirror_lacks_a_newer_commit(tmp_path, upstream, cache_dir):
    checkout(Repo(str(upstream)), new_workspace(tmp_path, "before"), cache_dir)
    third = commit_file(upstream, "app.py", "VERSION = 3\n", "third")
    clones, fetches = sources.activity.clones, sources.activity.fetches

    workspace = new_workspace(tmp_path, "after")
    checkout(Repo(str(upstream), ref=third), workspace, cache_dir)

    assert (workspace / "app.py").read_text() == "VERSION = 3\n"
    assert sources.activity.clones - clones == 0
    assert sources.activity.fetches - fetches == 1


def test_concurrent_workspaces_of_one_repository_share_one_clone(tmp_path, upstream, cache_dir):
    clones = sources.activity.clones
    workspaces = [new_workspace(tmp_path, f"trial-{n}") for n in range(8)]
    failures: list[BaseException] = []

    def run(workspace: Path) -> None:
        try:
            checkout(Repo(str(upstream), ref="v1"), workspace, cache_dir)
        except BaseException as error:  # collected so the test reports it, not the thread
            failures.append(error)

    threads = [threading.Thread(target=run, args=(w,)) for w in workspaces]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    assert [(w / "app.py").read_text() for w in workspaces] == ["VERSION = 1\n"] * 8
    assert sources.activity.clones - clones == 1


# --- resolving owner/name ----------------------------------------------------------------------


def test_it_resolves_owner_and_name_against_the_git_host():
    assert resolve_repo_url("acme/api", "https://github.com") == "https://github.com/acme/api.git"
    assert resolve_repo_url("acme/api", "https://git.example.com/") == (
        "https://git.example.com/acme/api.git"
    )
    assert resolve_repo_url("acme/api.git", "https://github.com") == (
        "https://github.com/acme/api.git"
    )


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/acme/api",
        "http://git.local/acme/api.git",
        "ssh://git@github.com/acme/api.git",
        "git@github.com:acme/api.git",
        "file:///srv/git/api",
        "/srv/git/api",
    ],
)
def test_it_keeps_clone_urls_and_absolute_paths_as_they_are(url):
    assert resolve_repo_url(url, "https://github.com") == url


@pytest.mark.parametrize("url", ["api", "acme/api/extra", "../acme/api", "acme/.."])
def test_it_rejects_a_repository_it_cannot_place(url):
    with pytest.raises(SourceError, match="neither owner/name, a clone URL nor an absolute"):
        resolve_repo_url(url, "https://github.com")


# --- files and empty workspaces --------------------------------------------------------------


def test_it_writes_files_with_nested_folders(tmp_path, cache_dir):
    workspace = new_workspace(tmp_path)
    source = Files({"src/add.py": "def add(a, b):\n    return 0\n", "README.md": "# calc\n"})

    materialize(source, workspace, cache_dir=cache_dir, git_host=GIT_HOST)

    assert (workspace / "src" / "add.py").read_text() == "def add(a, b):\n    return 0\n"
    assert (workspace / "README.md").read_text() == "# calc\n"


@pytest.mark.parametrize("path", ["../outside.txt", "src/../../outside.txt", "/tmp/outside.txt"])
def test_it_refuses_files_outside_the_workspace(tmp_path, cache_dir, path):
    workspace = new_workspace(tmp_path)
    source = Files({"inside.txt": "ok", path: "escaped"})

    with pytest.raises(SourceError, match="inside the workspace"):
        materialize(source, workspace, cache_dir=cache_dir, git_host=GIT_HOST)

    assert list(workspace.iterdir()) == []
    assert not (tmp_path / "outside.txt").exists()


def test_it_reports_a_file_that_collides_with_a_folder(tmp_path, cache_dir):
    source = Files({"src": "not a folder", "src/add.py": "x = 1\n"})

    with pytest.raises(SourceError, match="could not write file 'src/add.py'"):
        materialize(source, new_workspace(tmp_path), cache_dir=cache_dir, git_host=GIT_HOST)


def test_no_source_leaves_the_workspace_empty(tmp_path, cache_dir):
    workspace = new_workspace(tmp_path)

    materialize(None, workspace, cache_dir=cache_dir, git_host=GIT_HOST)

    assert list(workspace.iterdir()) == []
