"""Bundles as bytes: which files of a folder go in, the canonical archive they make, its digest,
and unpacking it again.

A ``tree`` bundle is a tar whose bytes depend only on the files' paths, contents and executable
bits (sorted entries, no times, no owners), so the same folder always gives the same digest:
the sha256 of the uncompressed tar. It is stored and sent gzip-compressed. A ``git`` bundle is a
``git bundle`` file holding one commit of a local repository; git's bytes are not canonical, so
its digest names the commit instead.

Pure: no database, no settings. The store (``evals_app.bundle_store``) keeps the bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec

KIND_TREE = "tree"
KIND_GIT = "git"
IGNORE_FILE = ".proctorignore"
# Never part of a bundle: version control, virtual environments, dependencies, caches and
# Proctor's own folder. A .proctorignore at the bundle's root adds to these (gitignore syntax;
# a "!pattern" line takes a default back).
DEFAULT_IGNORES = (
    ".git/",
    ".hg/",
    ".svn/",
    ".venv/",
    "venv/",
    "node_modules/",
    "__pycache__/",
    "*.pyc",
    ".proctor/",
    ".mypy_cache/",
    ".pytest_cache/",
    ".ruff_cache/",
    ".tox/",
    ".nox/",
    ".DS_Store",
)


class BundleTooLarge(Exception):
    """The files to bundle add up to more than the limit; the message names the largest."""


@dataclass(frozen=True)
class PackedBundle:
    digest: str
    kind: str
    data: bytes  # gzip'd tar for a tree, the git bundle file for a commit
    size: int  # bytes before compression


def ignore_rules(root: Path) -> pathspec.GitIgnoreSpec:
    lines = list(DEFAULT_IGNORES)
    ignore_file = root / IGNORE_FILE
    if ignore_file.is_file():
        lines += ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
    return pathspec.GitIgnoreSpec.from_lines(lines)


def walk_files(folder: Path, root: Path, rules: pathspec.GitIgnoreSpec) -> Iterator[Path]:
    """Every file under ``folder`` that ``rules`` (relative to ``root``) keep, virtual
    environments skipped wherever they are. Linked folders are followed (their files are
    bundled as files) unless they lead back into a folder already being walked."""
    seen = {os.path.realpath(folder)}
    for current, subfolders, filenames in os.walk(folder, followlinks=True):
        here = Path(current)
        kept = []
        for name in sorted(subfolders):
            path = here / name
            relative = path.relative_to(root).as_posix() + "/"
            if rules.match_file(relative) or (path / "pyvenv.cfg").is_file():
                continue
            real = os.path.realpath(path)
            if real in seen:  # a link cycle, or a second way into the same folder
                continue
            seen.add(real)
            kept.append(name)
        subfolders[:] = kept
        for name in sorted(filenames):
            path = here / name
            if path.is_file() and not rules.match_file(path.relative_to(root).as_posix()):
                yield path


def folder_files(folder: Path) -> dict[str, Path]:
    """A whole folder's files by relative path, ignore rules applied (a profile's folder)."""
    folder = folder.resolve()
    rules = ignore_rules(folder)
    return {p.relative_to(folder).as_posix(): p for p in walk_files(folder, folder, rules)}


def check_size(files: dict[str, Path], limit: int, what: str) -> int:
    sizes = {rel: path.stat().st_size for rel, path in files.items()}
    total = sum(sizes.values())
    if total > limit:
        largest = sorted(sizes.items(), key=lambda item: -item[1])[:5]
        named = ", ".join(f"{rel} ({_mb(size)})" for rel, size in largest)
        raise BundleTooLarge(
            f"{what} holds {_mb(total)}, over the {_mb(limit)} bundle limit; its largest files: "
            f"{named}; leave such files out with a {IGNORE_FILE} or raise PROCTOR_BUNDLE_MAX_MB"
        )
    return total


def _mb(size: int) -> str:
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def pack_tree(files: dict[str, Path]) -> PackedBundle:
    """The canonical archive of ``files`` (relative POSIX path -> file on disk)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for relative in sorted(files):
            path = files[relative]
            data = path.read_bytes()
            info = tarfile.TarInfo(relative)
            info.size = len(data)
            info.mode = 0o755 if os.access(path, os.X_OK) else 0o644
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    tar_bytes = raw.getvalue()
    return PackedBundle(
        digest=hashlib.sha256(tar_bytes).hexdigest(),
        kind=KIND_TREE,
        data=gzip.compress(tar_bytes, mtime=0),
        size=len(tar_bytes),
    )


def tree_digest(data: bytes) -> str:
    """The digest a received tree bundle's bytes must have (to check an upload)."""
    return hashlib.sha256(gzip.decompress(data)).hexdigest()


def git_digest(commit: str) -> str:
    return hashlib.sha256(f"git commit {commit}".encode()).hexdigest()


GIT_BRANCH = "refs/heads/proctor"


def pack_git_commit(repository: Path, commit: str) -> PackedBundle:
    """A git bundle of ``commit`` (and its history) from a local repository, made from a
    throwaway ``--shared`` clone so the person's repository gains no ref. Runs git."""
    with tempfile.TemporaryDirectory(prefix="proctor-git-bundle-") as scratch:
        clone = Path(scratch) / "clone"
        target = Path(scratch) / "commit.bundle"
        _git(["clone", "--quiet", "--shared", "--no-checkout", str(repository), str(clone)])
        _git(["update-ref", GIT_BRANCH, commit], cwd=clone)
        _git(["bundle", "create", str(target), GIT_BRANCH], cwd=clone)
        data = target.read_bytes()
    return PackedBundle(digest=git_digest(commit), kind=KIND_GIT, data=data, size=len(data))


def _git(args: list[str], cwd: Path | None = None) -> None:
    subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
    )


def unpack(kind: str, data: bytes, dest: Path) -> None:
    """Lay a bundle out in ``dest`` (created): a tree's files, or a git bundle as
    ``dest/commit.bundle`` that ``git clone`` reads."""
    dest.mkdir(parents=True, exist_ok=True)
    if kind == KIND_GIT:
        (dest / "commit.bundle").write_bytes(data)
        return
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data)), mode="r:") as tar:
        # A bundle Proctor made holds only relative paths inside it: anything else was not
        # made by Proctor, and is refused whole rather than quietly rewritten.
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if member.name.startswith("/") or ".." in parts:
                raise tarfile.FilterError(f"the bundle holds an unsafe path: {member.name!r}")
        # The "data" filter also refuses links out of dest and device files.
        tar.extractall(dest, filter="data")


def unpack_once(kind: str, read: Callable[[], bytes], dest: Path, *, marker: str = "") -> Path:
    """``unpack`` into ``dest`` unless it is already there (``read`` gives the bytes, called
    only then); safe when several processes or threads unpack the same bundle at once (each
    unpacks beside it and renames). ``marker`` names an empty file to leave at the root."""
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        unpack(kind, read(), staging)
        if marker:
            (staging / marker).touch()
        try:
            staging.rename(dest)
        except OSError:
            if not dest.is_dir():  # not a lost race: a real failure
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return dest


def relative_files(paths: Iterable[Path], root: Path) -> dict[str, Path]:
    out = {}
    for path in paths:
        try:
            out[path.resolve().relative_to(root).as_posix()] = path.resolve()
        except ValueError:
            continue
    return out
