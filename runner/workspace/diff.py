"""The workspace diff artifact: what the agent changed, as a git-style unified diff.

A snapshot is taken once the workspace is ready (source materialized, prepare done), so the
diff shows the agent's work and not the setup's. The snapshot copies the workspace into a
private temp folder rather than relying on the workspace's own git state: the agent may commit,
reset or delete ``.git``, and a ``files()`` workspace has no repository at all.
"""

from __future__ import annotations

import filecmp
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from runner.sandboxes.leftovers import owned_prefix

# A diff of a multi-megabyte file (a build output, a database) helps nobody and bloats the
# artifact; such files are only named.
LARGE_FILE_BYTES = 2 * 1024 * 1024
DIFF_TIMEOUT_S = 120


@dataclass(frozen=True)
class _Entry:
    """One path in a tree: a regular file, a symlink (never followed) or a large file."""

    kind: str  # "file", "link" or "large"
    detail: str = ""  # the link's target, or the large file's sha256


class WorkspaceSnapshot:
    """The state of a workspace at one moment, kept in a private temp folder until discarded."""

    def __init__(self, copy_dir: Path, entries: dict[str, _Entry], exclude: tuple[str, ...]):
        self._copy_dir: Path | None = copy_dir
        self._entries = entries
        self._exclude = exclude

    @classmethod
    def take(cls, workspace: Path, *, exclude: Sequence[str] = ()) -> WorkspaceSnapshot:
        """Copy the workspace's files (except ``.git`` and the excluded relative paths) into a
        temp folder. Costs one read of every file and the disk space of the small ones."""
        excluded = tuple(_normalized(p) for p in exclude if _normalized(p))
        # Named after this process, so the start-up sweep removes it if Proctor crashes.
        copy_dir = Path(tempfile.mkdtemp(prefix=owned_prefix("snapshot")))
        try:
            entries: dict[str, _Entry] = {}
            for rel, entry in _walk(workspace, excluded):
                entries[rel] = entry
                if entry.kind != "large":
                    _copy_entry(workspace / rel, copy_dir / rel, entry)
        except BaseException:
            shutil.rmtree(copy_dir, ignore_errors=True)
            raise
        return cls(copy_dir, entries, excluded)

    def diff(self, workspace: Path) -> str:
        """A git-style unified diff from the snapshot to the workspace as it is now; empty when
        nothing changed. Runs ``git diff --no-index`` over copies of the changed files only."""
        if self._copy_dir is None:
            raise RuntimeError("this workspace snapshot was discarded")
        now = dict(_walk(workspace, self._exclude))
        changed: list[tuple[str, _Entry | None, _Entry | None]] = []
        large: list[str] = []
        for rel in sorted(self._entries.keys() | now.keys()):
            before, after = self._entries.get(rel), now.get(rel)
            if before == after and not self._content_differs(workspace, rel, before):
                continue
            if (before and before.kind == "large") or (after and after.kind == "large"):
                large.append(rel)
            else:
                changed.append((rel, before, after))

        text = self._git_diff(workspace, changed) if changed else ""
        if large:
            text += "".join(f"large file changed: {rel}\n" for rel in large)
        return text

    def discard(self) -> None:
        """Remove the temp copy. The snapshot cannot diff after this."""
        if self._copy_dir is not None:
            shutil.rmtree(self._copy_dir, ignore_errors=True)
            self._copy_dir = None

    def __enter__(self) -> WorkspaceSnapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()

    def _content_differs(self, workspace: Path, rel: str, entry: _Entry | None) -> bool:
        if entry is None or entry.kind != "file":
            return False  # links and large files compare by their recorded detail
        assert self._copy_dir is not None
        old, new = self._copy_dir / rel, workspace / rel
        if stat.S_IMODE(old.stat().st_mode) != stat.S_IMODE(new.stat().st_mode):
            return True
        return not filecmp.cmp(old, new, shallow=False)

    def _git_diff(
        self, workspace: Path, changed: list[tuple[str, _Entry | None, _Entry | None]]
    ) -> str:
        assert self._copy_dir is not None
        with tempfile.TemporaryDirectory(prefix="proctor-diff-") as scratch:
            # Folders named a and b, diffed with --no-prefix from their parent, give git's usual
            # a/<path> and b/<path> names without rewriting every line.
            root = Path(scratch)
            for rel, before, after in changed:
                if before is not None:
                    _copy_entry(self._copy_dir / rel, root / "a" / rel, before)
                if after is not None:
                    _copy_entry(workspace / rel, root / "b" / rel, after)
            (root / "a").mkdir(exist_ok=True)
            (root / "b").mkdir(exist_ok=True)
            result = subprocess.run(
                [
                    "git",
                    "-c",
                    "core.quotepath=off",
                    "diff",
                    "--no-index",
                    "--no-color",
                    "--no-ext-diff",
                    "--no-renames",
                    "--no-prefix",
                    "a",
                    "b",
                ],
                cwd=root,
                env=_isolated_git_env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=DIFF_TIMEOUT_S,
            )
        # git diff exits 1 when the trees differ; anything above means it failed.
        if result.returncode > 1:
            reason = result.stderr.decode("utf-8", "replace").strip()
            raise RuntimeError(f"git diff of the workspace failed: {reason}")
        output = result.stdout.decode("utf-8", "replace")
        return "".join(_fix_header(line) for line in output.splitlines(keepends=True))


def _normalized(rel: str) -> str:
    return rel.strip().removeprefix("./").strip("/")


def _is_excluded(rel: str, excluded: tuple[str, ...]) -> bool:
    return any(rel == ex or rel.startswith(ex + "/") for ex in excluded)


def _walk(workspace: Path, excluded: tuple[str, ...]) -> Iterator[tuple[str, _Entry]]:
    """Every file and symlink under the workspace, by relative posix path. Symlinks are
    reported as links and never followed, so nothing outside the workspace is read."""
    pending = [""]
    while pending:
        prefix = pending.pop()
        with os.scandir(workspace / prefix if prefix else workspace) as listing:
            items = sorted(listing, key=lambda item: item.name)
        for item in items:
            rel = f"{prefix}/{item.name}" if prefix else item.name
            # .git at any depth: the repository (or a submodule's) is not the agent's work.
            if item.name == ".git" or _is_excluded(rel, excluded):
                continue
            if item.is_symlink():
                yield rel, _Entry("link", os.readlink(item.path))
            elif item.is_dir(follow_symlinks=False):
                pending.append(rel)
            elif item.is_file(follow_symlinks=False):
                if item.stat(follow_symlinks=False).st_size > LARGE_FILE_BYTES:
                    yield rel, _Entry("large", _sha256(Path(item.path)))
                else:
                    yield rel, _Entry("file")
            # sockets, fifos and devices have no content to diff


def _copy_entry(source: Path, target: Path, entry: _Entry) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if entry.kind == "link":
        os.symlink(entry.detail, target)
    else:
        shutil.copy2(source, target, follow_symlinks=False)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fix_header(line: str) -> str:
    """Name both sides a/<path> b/<path> on a ``diff --git`` line.

    For an added or deleted file git repeats the one existing side (``b/x b/x``). Both halves
    hold the same path behind a one-letter folder, so the path is recovered by length.
    """
    if not line.startswith("diff --git "):
        return line
    rest = line[len("diff --git ") :].rstrip("\n")
    quote = '"' if rest.startswith('"') else ""
    # rest is  {q}X/path{q} {q}Y/path{q}  with X, Y in {a, b}
    overhead = 2 * (len(quote) * 2 + 2) + 1
    if (len(rest) - overhead) % 2:
        return line
    length = (len(rest) - overhead) // 2
    path = rest[len(quote) + 2 : len(quote) + 2 + length]
    return f"diff --git {quote}a/{path}{quote} {quote}b/{path}{quote}\n"


def _isolated_git_env() -> dict[str, str]:
    # The diff must look the same on every machine: ignore the user's and system git config
    # (diff.noprefix, color.ui, diff.external, ...).
    env = dict(os.environ)
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    env["GIT_CONFIG_GLOBAL"] = os.devnull
    return env
