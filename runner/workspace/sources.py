"""Sources: putting a case's starting files into a fresh, empty workspace folder.

A ``Files`` source is written out as given. A ``Repo`` source is checked out from a bare mirror
kept under the cache folder: a suite with 100 trials clones the repository once, and every
workspace after that is a cheap ``git clone --shared`` of the mirror at the requested ref.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit, urlunsplit

from proctor.definitions import Files, Repo, repo_kind
from runner.sandboxes.processes import run_process

log = logging.getLogger(__name__)

# Talking to a remote may be slow (a large repository); work on local folders never should be.
NETWORK_TIMEOUT_S = 15 * 60
LOCAL_TIMEOUT_S = 5 * 60

_FULL_SHA = re.compile(r"^[0-9a-fA-F]{40}$")


class SourceError(Exception):
    """A source could not be materialized; the message is one sentence a user can act on."""


@dataclass
class MirrorActivity:
    """How often this process went to a remote, so tests and logs can see the cache at work."""

    clones: int = 0
    fetches: int = 0


activity = MirrorActivity()
_activity_lock = threading.Lock()


def _count(kind: str) -> None:
    with _activity_lock:
        setattr(activity, kind, getattr(activity, kind) + 1)


# --- resolving where a repository lives ------------------------------------------------------


def resolve_repo_url(url: str, git_host: str) -> str:
    """The clone URL for a ``Repo.url``: ``owner/name`` goes to ``git_host``; URLs and absolute
    paths are returned unchanged."""
    kind = repo_kind(url)
    if kind in ("url", "path"):
        return url
    if kind == "owner/name":
        if not git_host.strip():
            raise SourceError(
                f"repository {url} needs a git host to resolve against, and none is set"
            )
        owner, name = url.split("/")
        name = name.removesuffix(".git")
        return f"{git_host.rstrip('/')}/{owner}/{name}.git"
    raise SourceError(
        f"repository {url!r} is neither owner/name, a clone URL nor an absolute local path"
    )


def _shown(url: str) -> str:
    """The URL as it may appear in messages: a password or token in it is left out."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


# --- materializing ---------------------------------------------------------------------------


def materialize(source: Files | Repo | None, dest: Path, *, cache_dir: Path, git_host: str) -> None:
    """Fill ``dest`` (an existing, empty folder) with the source. Runs git subprocesses for a
    ``Repo``, and may clone or fetch over the network when the cached mirror lacks the ref."""
    if source is None:
        return
    if isinstance(source, Files):
        _write_files(source, dest)
    elif isinstance(source, Repo):
        _check_out_repo(source, dest, cache_dir=cache_dir, git_host=git_host)
    else:
        raise SourceError(f"a source must be files(...) or repo(...), not {type(source).__name__}")


def _write_files(source: Files, dest: Path) -> None:
    # Check every path before writing any, so a bad source leaves the workspace untouched.
    root = dest.resolve()
    targets: list[tuple[str, Path, str]] = []
    for rel, text in source.files.items():
        pure = PurePosixPath(rel)
        if not rel or pure.is_absolute() or ".." in pure.parts:
            raise SourceError(f"file path {rel!r} must be relative and stay inside the workspace")
        target = root / pure
        if target == root or not target.is_relative_to(root):
            raise SourceError(f"file path {rel!r} must name a file inside the workspace")
        targets.append((rel, target, text))
    for rel, target, text in targets:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        except OSError as error:  # e.g. "a" and "a/b" both given as files
            raise SourceError(f"could not write file {rel!r}: {error.strerror}") from None


def _check_out_repo(source: Repo, dest: Path, *, cache_dir: Path, git_host: str) -> None:
    url = resolve_repo_url(source.url, git_host)
    ref = source.ref or None
    if ref is not None and (ref.startswith("-") or not ref.strip()):
        raise SourceError(f"ref {ref!r} of {_shown(url)} is not a valid git ref")
    # Workspaces record the mirror's path in their alternates file: it must be absolute.
    cache_dir = cache_dir.resolve()
    commit = _commit_in_mirror(url, ref, cache_dir)
    mirror = _mirror_path(url, cache_dir)
    if ref is None:
        # No ref: a normal clone checks out the default branch as a branch, as people expect.
        _git(
            ["clone", "--quiet", "--shared", str(mirror), str(dest)],
            failure=f"could not check out {_shown(url)}",
        )
    else:
        _git(
            ["clone", "--quiet", "--shared", "--no-checkout", str(mirror), str(dest)],
            failure=f"could not check out {_shown(url)}",
        )
        _git(
            ["checkout", "--quiet", "--detach", commit],
            cwd=dest,
            failure=f"could not check out {ref} of {_shown(url)}",
        )
    _git(
        ["remote", "set-url", "origin", url],
        cwd=dest,
        failure=f"could not point the workspace's origin at {_shown(url)}",
    )


def _mirror_path(url: str, cache_dir: Path) -> Path:
    digest = hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    return cache_dir / "repos" / f"{digest}.git"


def _commit_in_mirror(url: str, ref: str | None, cache_dir: Path) -> str:
    """The commit ``ref`` names, after making sure the mirror exists and holds it.

    Only updating the mirror needs the lock: once a commit is known, cloning from the mirror
    is safe alongside a fetch, because fetches only add objects (gc is off in the mirror).
    """
    mirror = _mirror_path(url, cache_dir)
    mirror.parent.mkdir(parents=True, exist_ok=True)
    wanted = ref or "HEAD"
    with _locked(mirror.with_suffix(".lock")):
        if not mirror.is_dir():
            _clone_mirror(url, mirror)
        commit = _resolve(mirror, wanted)
        if commit is None:
            _count("fetches")
            _git(
                ["fetch", "--quiet", "--prune", "--tags", "origin"],
                cwd=mirror,
                timeout=NETWORK_TIMEOUT_S,
                failure=f"could not fetch {_shown(url)}",
            )
            commit = _resolve(mirror, wanted)
        if commit is None and ref is not None:
            commit = _fetch_single(mirror, ref)
    if commit is None:
        if ref is None:
            raise SourceError(f"repository {_shown(url)} has no commits to check out")
        raise SourceError(f"ref {ref} does not exist in {_shown(url)}")
    return commit


def _clone_mirror(url: str, mirror: Path) -> None:
    # Clone beside the final place and rename, so a clone cut short never looks like a mirror.
    staging = Path(tempfile.mkdtemp(prefix=f"{mirror.name}.partial-", dir=mirror.parent))
    try:
        _count("clones")
        log.info("cloning %s into the repository cache", _shown(url))
        _git(
            ["clone", "--quiet", "--bare", url, str(staging)],
            timeout=NETWORK_TIMEOUT_S,
            failure=f"could not clone {_shown(url)}",
        )
        # A bare clone sets no fetch refspec; later fetches must refresh branches and tags.
        _git(
            ["config", "remote.origin.fetch", "+refs/heads/*:refs/heads/*"],
            cwd=staging,
            failure=f"could not set up the cache of {_shown(url)}",
        )
        # Workspaces borrow the mirror's objects (--shared); gc must never delete them.
        _git(
            ["config", "gc.auto", "0"],
            cwd=staging,
            failure=f"could not set up the cache of {_shown(url)}",
        )
        staging.rename(mirror)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _fetch_single(mirror: Path, ref: str) -> str | None:
    """Fetch one ref the remote does not advertise among its branches and tags (a full commit
    sha, ``refs/pull/1/head``); None when the remote has no such thing."""
    if not (_FULL_SHA.match(ref) or ref.startswith("refs/")):
        return None
    _count("fetches")
    try:
        _git(["fetch", "--quiet", "origin", ref], cwd=mirror, timeout=NETWORK_TIMEOUT_S)
    except SourceError:
        return None
    return _resolve(mirror, ref) or _resolve(mirror, "FETCH_HEAD")


def _resolve(repo: Path, ref: str) -> str | None:
    result = _git(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
        cwd=repo,
        check=False,
    )
    sha = result.strip()
    return sha or None


@contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    # flock locks belong to the open file, so each caller opens its own: this excludes other
    # threads of this process as well as other worker processes sharing the cache folder.
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


# --- running git -----------------------------------------------------------------------------


def _git_env() -> dict[str, str]:
    env = dict(os.environ)
    # Never wait for a password nobody will type: fail and report instead.
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    return env


def _git(
    args: Sequence[str],
    *,
    failure: str = "git failed",
    cwd: Path | None = None,
    timeout: float = LOCAL_TIMEOUT_S,
    check: bool = True,
) -> str:
    """Run git and return its stdout; on failure raise ``SourceError("<failure>: <why>")``.

    Through the one process runner: git's helpers (``git-remote-https``, ``ssh``) are in its
    process group, so a timeout stops them too instead of leaving them holding the pipes.
    """
    result = run_process(
        ["git", *args],
        env=_git_env(),
        cwd=None if cwd is None else str(cwd),
        timeout_s=timeout,
    )
    if result.timed_out:
        raise SourceError(f"{failure}: git did not finish within {int(timeout)} seconds")
    if result.exit_code != 0 and check:
        raise SourceError(f"{failure}: {_reason(result.stderr)}")
    return result.stdout


def _reason(stderr: str) -> str:
    """git's own explanation, shortened to its last meaningful line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return "git failed without saying why"
    reason = lines[-1]
    for prefix in ("fatal: ", "error: "):
        reason = reason.removeprefix(prefix)
    return reason.rstrip(".")
