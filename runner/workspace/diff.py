"""What the agent changed in the workspace: the whole-trial diff artifact and each turn's changes.

A snapshot is taken once the workspace is ready (source materialized, prepare done), so the
diff shows the agent's work and not the setup's; the session takes one before every turn, so a
turn's file changes include what its shell commands wrote. The snapshot is the workspace's own
record, not its git state: the agent may commit, reset or delete ``.git``, and a ``files()``
workspace has no repository at all.

It is cheap to take again: a snapshot keeps each file's stat, a hash of its content and, for
files small enough to diff, its bytes: in memory up to :data:`MEMORY_BUDGET_BYTES` for the
snapshots of one trial, in a private temp folder beyond (a very large workspace). :meth:`WorkspaceSnapshot.changes` stats every file and reads only
those whose size, times, inode or mode moved (and those written in the same instant the
previous snapshot was taken, whose stat cannot be trusted, as git's "racily clean" files); the
next snapshot reuses everything else. The diff text is written here (difflib for the hunks), in
``git diff`` format, with no process and no scratch copy.

Generated files are left out of both by default (:data:`DEFAULT_IGNORE`: Python byte code,
tool caches, object files); a suite's ``diff_ignore`` adds patterns. Both are read as the lines
of a ``.gitignore``: ``*`` stops at ``/``, ``**`` crosses folders, a trailing ``/`` matches
folders only, ``!`` includes a path again, and a pattern without a ``/`` (but a trailing one)
matches a name at any depth (docs/workspace-changes.md).
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import os
import re
import shutil
import stat
import tempfile
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pathspec

from runner.sandboxes.leftovers import owned_prefix

# A diff of a multi-megabyte file (a build output, a database) helps nobody and bloats the
# artifact; such files are only named, and compared by hash.
LARGE_FILE_BYTES = 2 * 1024 * 1024
# How many bytes of file contents a trial's snapshots hold in memory; the rest is written to
# a temp folder, so a huge repository costs disk, not the worker's memory.
MEMORY_BUDGET_BYTES = 256 * 1024 * 1024

# Left out of the diff and of the turns' file changes unless a suite says otherwise: what
# running the code or its tools leaves behind, never what the agent wrote.
DEFAULT_IGNORE: tuple[str, ...] = (
    "__pycache__",
    "*.pyc",
    "*.pyo",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
    "*.o",
    "*.obj",
    "*.class",
    ".DS_Store",
    ".aider.tags.cache.v*",  # Aider's repository map (a SQLite file)
)

# A file whose mtime or ctime is this close to the moment of its snapshot may be rewritten
# within the same clock tick without its stat changing: its content is compared instead.
RACY_NS = 2_000_000_000
# git's test for binary content: a NUL byte in the first 8000 bytes.
BINARY_PROBE = 8000
NULL_ID = "0000000"
# Lines as git splits them: at "\n" only (str.splitlines also splits at \r, \f, ...).
_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


@dataclass(frozen=True)
class _Entry:
    """One path of a tree: a regular file, a symlink (never followed) or a large file."""

    kind: str  # "file", "link" or "large"
    mode: str  # git's: 100644, 100755 or 120000
    stat_key: tuple[int, ...]
    digest: str  # git's blob id of a file or a link's target; a large file's sha256
    data: bytes | None = None  # a file's bytes or a link's target, when kept in memory
    spilled: str = ""  # else the file holding them

    def same_content(self, other: _Entry) -> bool:
        return self.kind == other.kind and self.digest == other.digest

    def content(self) -> bytes:
        if self.data is not None:
            return self.data
        if self.spilled:
            return Path(self.spilled).read_bytes()
        return b""


class _Store:
    """Where the snapshots of one workspace keep file contents: memory up to the budget, then
    a temp folder, removed by :meth:`close` or when the last snapshot is gone."""

    def __init__(self) -> None:
        self.kept = 0
        self.folder: str | None = None
        self._count = 0
        self._cleanup: weakref.finalize | None = None

    def keep(self, data: bytes) -> tuple[bytes | None, str]:
        if self.kept + len(data) <= MEMORY_BUDGET_BYTES:
            self.kept += len(data)
            return data, ""
        if self.folder is None:
            # Named after this process, so the start-up sweep removes it if Proctor crashes.
            self.folder = tempfile.mkdtemp(prefix=owned_prefix("snapshot"))
            self._cleanup = weakref.finalize(self, shutil.rmtree, self.folder, True)
        self._count += 1
        path = os.path.join(self.folder, str(self._count))
        with open(path, "wb") as handle:
            handle.write(data)
        return None, path

    def close(self) -> None:
        if self._cleanup is not None:
            self._cleanup()


class Ignore:
    """Which workspace paths are nobody's work: fixed paths (the case's cache folder) and
    patterns read as a ``.gitignore`` is (pathspec's ``GitIgnoreSpec``). A walk asks about
    every entry, a folder as ``path/`` so that a pattern ending in ``/`` matches only folders,
    and does not enter an ignored folder: as in git, a file inside one cannot be included again
    by a ``!`` pattern (nor is a path under an ``exact`` folder asked about)."""

    def __init__(self, exact: Sequence[str], patterns: Sequence[str]) -> None:
        self.exact = frozenset(exact)
        self.patterns = tuple(patterns)
        self._spec = pathspec.GitIgnoreSpec.from_lines(self.patterns)
        self._may_exclude = _any_excluding_pattern(self._spec)

    @classmethod
    def of(cls, exclude: Sequence[str] = (), patterns: Iterable[str] | None = None) -> Ignore:
        chosen = DEFAULT_IGNORE if patterns is None else tuple(patterns)
        return _compiled_ignore(
            tuple(p for p in (_normalized(e) for e in exclude) if p),
            tuple(p.strip() for p in chosen if p.strip()),
        )

    def __call__(self, rel: str, *, is_folder: bool) -> bool:
        """Whether the entry at ``rel`` (a posix path from the workspace root) is left out."""
        if rel in self.exact:
            return True
        asked = rel + "/" if is_folder else rel
        return self._may_exclude.search(asked) is not None and self._spec.match_file(asked)


# How pathspec's regex for a pattern without an inner "/" starts: any folders, then the name.
_AT_ANY_DEPTH = "^(?:.+/)?"
# The named group pathspec puts in a pattern's regex (a match by a folder), made plain so
# that the regexes can share one alternation.
_NAMED_GROUP = re.compile(r"\(\?P<[A-Za-z_][A-Za-z0-9_]*>")


def _any_excluding_pattern(spec: pathspec.GitIgnoreSpec) -> re.Pattern[str]:
    """One regex that finds a path any excluding pattern of ``spec`` matches. Most paths match
    none, and one search says so at a fifth of the cost of asking the spec, which tries every
    pattern in turn: the walk asks for every file of the workspace, after every turn. The
    patterns matched at any depth share their leading ``(?:.+/)?``, searched once."""
    at_any_depth: list[str] = []
    others: list[str] = []
    for pattern in spec.patterns:
        if not pattern.include or pattern.regex is None:
            continue  # "!" patterns only ever include a path again
        regex = _NAMED_GROUP.sub("(?:", pattern.regex.pattern)
        if regex.startswith(_AT_ANY_DEPTH):
            at_any_depth.append(regex.removeprefix(_AT_ANY_DEPTH))
        else:
            others.append(regex)
    if at_any_depth:
        others.insert(0, f"{_AT_ANY_DEPTH}(?:{'|'.join(at_any_depth)})")
    return re.compile("|".join(others) or "(?!)")


@functools.lru_cache(maxsize=64)
def _compiled_ignore(exact: tuple[str, ...], patterns: tuple[str, ...]) -> Ignore:
    """The rules for these folders and patterns, compiled once: every trial of a suite takes
    a snapshot with the same ones."""
    return Ignore(exact, patterns)


class WorkspaceSnapshot:
    """The state of a workspace at one moment, held in memory."""

    def __init__(
        self,
        entries: dict[str, _Entry],
        ignore: Ignore,
        taken_ns: int,
        store: _Store,
        *,
        owns_store: bool,
    ):
        self._entries: dict[str, _Entry] | None = entries
        self._ignore = ignore
        self._taken_ns = taken_ns
        self._store = store
        self._owns_store = owns_store

    @classmethod
    def take(
        cls,
        workspace: Path,
        *,
        exclude: Sequence[str] = (),
        ignore: Iterable[str] | None = None,
    ) -> WorkspaceSnapshot:
        """Record the workspace's files, except ``.git``, the ``exclude`` folders and what the
        ``ignore`` patterns match (``DEFAULT_IGNORE`` when None). Reads every file once."""
        rules = Ignore.of(exclude, ignore)
        taken_ns = time.time_ns()
        store = _Store()
        entries = dict(_scan(workspace, rules, store, previous={}, since_ns=0))
        return cls(entries, rules, taken_ns, store, owns_store=True)

    def changes(self, workspace: Path) -> tuple[list[str], WorkspaceSnapshot]:
        """The relative paths that were added, modified, removed or re-moded since this
        snapshot, sorted, and a snapshot of the workspace as it is now (this one stays valid).
        Reads only the files whose stat moved."""
        before = self._live()
        taken_ns = time.time_ns()
        now = dict(
            _scan(workspace, self._ignore, self._store, previous=before, since_ns=self._taken_ns)
        )
        changed = [
            rel
            for rel in sorted(before.keys() | now.keys())
            if _differs(before.get(rel), now.get(rel))
        ]
        return changed, WorkspaceSnapshot(
            now, self._ignore, taken_ns, self._store, owns_store=False
        )

    def diff(self, workspace: Path) -> str:
        """A git-style unified diff from the snapshot to the workspace as it is now; empty when
        nothing changed. Large files are named on a line of their own after the diff."""
        changed, after = self.changes(workspace)
        return diff_between(self, after, changed)

    def files(self) -> Iterator[tuple[str, str, bytes | None]]:
        """Each recorded path with its git mode and its content (a link's target for mode
        120000); None for a large file, whose bytes a snapshot does not hold. A spilled file's
        bytes are read back from the temp folder."""
        for rel, entry in sorted(self._live().items()):
            yield rel, entry.mode, None if entry.kind == "large" else entry.content()

    def discard(self) -> None:
        """Let go of the recorded contents (and, for the first snapshot, of every later one's
        temp folder). The snapshot cannot compare after this."""
        self._entries = None
        if self._owns_store:
            self._store.close()

    def __enter__(self) -> WorkspaceSnapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()

    def _live(self) -> dict[str, _Entry]:
        if self._entries is None:
            raise RuntimeError("this workspace snapshot was discarded")
        return self._entries


def diff_between(
    before: WorkspaceSnapshot, after: WorkspaceSnapshot, changed: Sequence[str] | None = None
) -> str:
    """The git-style diff text between two snapshots of one workspace."""
    old, new = before._live(), after._live()
    paths = (
        changed
        if changed is not None
        else [r for r in sorted(old.keys() | new.keys()) if _differs(old.get(r), new.get(r))]
    )
    text: list[str] = []
    large: list[str] = []
    for rel in paths:
        a, b = old.get(rel), new.get(rel)
        if (a and a.kind == "large") or (b and b.kind == "large"):
            large.append(rel)
        elif a and b and (a.kind == "link") != (b.kind == "link"):
            # git shows a change of type as a deletion and an addition.
            text.append(_file_diff(rel, a, None))
            text.append(_file_diff(rel, None, b))
        else:
            text.append(_file_diff(rel, a, b))
    return "".join(text) + "".join(f"large file changed: {rel}\n" for rel in large)


def _differs(a: _Entry | None, b: _Entry | None) -> bool:
    if a is None or b is None:
        return a is not b
    return a.mode != b.mode or not a.same_content(b)


def _normalized(rel: str) -> str:
    return rel.strip().removeprefix("./").strip("/")


def _scan(
    workspace: Path,
    ignore: Ignore,
    store: _Store,
    *,
    previous: dict[str, _Entry],
    since_ns: int,
) -> Iterator[tuple[str, _Entry]]:
    """Every file and symlink under the workspace, by relative posix path. Symlinks are
    reported as links and never followed, so nothing outside the workspace is read. An entry
    of ``previous`` whose stat is unchanged (and not racily recent) is reused unread."""
    pending = [""]
    while pending:
        prefix = pending.pop()
        try:
            listing = os.scandir(workspace / prefix if prefix else workspace)
        except (FileNotFoundError, NotADirectoryError):
            continue  # removed while being walked
        with listing:
            items = list(listing)
        for item in items:
            rel = f"{prefix}/{item.name}" if prefix else item.name
            # .git at any depth: the repository (or a submodule's) is not the agent's work.
            if item.name == ".git" or ignore(rel, is_folder=item.is_dir(follow_symlinks=False)):
                continue
            try:
                info = item.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(info.st_mode):
                pending.append(rel)
                continue
            if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
                continue  # sockets, fifos and devices have no content to diff
            key = (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_mode)
            known = previous.get(rel)
            if (
                known is not None
                and known.stat_key == key
                and since_ns - max(info.st_mtime_ns, info.st_ctime_ns) > RACY_NS
            ):
                yield rel, known
                continue
            entry = _read(Path(item.path), info, key, store)
            if entry is not None:
                # Unchanged content keeps the earlier entry's bytes (one copy kept).
                if known is not None and known.mode == entry.mode and known.same_content(entry):
                    entry = replace(known, stat_key=key)
                yield rel, entry


def _read(path: Path, info: os.stat_result, key: tuple[int, ...], store: _Store) -> _Entry | None:
    try:
        if stat.S_ISLNK(info.st_mode):
            target = os.fsencode(os.readlink(path))
            return _Entry("link", "120000", key, _blob_id(target), data=target)
        mode = "100755" if info.st_mode & stat.S_IXUSR else "100644"
        if info.st_size > LARGE_FILE_BYTES:
            return _Entry("large", mode, key, _sha256(path))
        data = path.read_bytes()
    except (FileNotFoundError, PermissionError):
        return None  # gone, or unreadable to us: not something a diff can show
    kept, spilled = store.keep(data)
    return _Entry("file", mode, key, _blob_id(data), data=kept, spilled=spilled)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _blob_id(data: bytes) -> str:
    """git's object id of ``data`` (its ``index`` lines show the first 7 digits)."""
    digest = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
    digest.update(data)
    return digest.hexdigest()


def _quoted(path: str) -> str:
    """A path as git prints it with core.quotepath=off: C-quoted only when it holds a quote,
    a backslash or a control character."""
    if not any(c in path for c in '"\\') and all(ord(c) >= 32 and c != "\x7f" for c in path):
        return path
    escapes = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
    body = "".join(
        escapes.get(c, c if ord(c) >= 32 and c != "\x7f" else f"\\{ord(c):03o}") for c in path
    )
    return f'"{body}"'


def _side(prefix: str, rel: str) -> str:
    quoted = _quoted(rel)
    return f'"{prefix}/{quoted[1:]}' if quoted.startswith('"') else f"{prefix}/{quoted}"


def _file_diff(rel: str, a: _Entry | None, b: _Entry | None) -> str:
    old_name, new_name = _side("a", rel), _side("b", rel)
    lines = [f"diff --git {old_name} {new_name}\n"]
    old_data = a.content() if a else b""
    new_data = b.content() if b else b""
    same_data = a is not None and b is not None and a.digest == b.digest
    old_id = a.digest[:7] if a else NULL_ID
    new_id = b.digest[:7] if b else NULL_ID
    if a is None and b is not None:
        lines.append(f"new file mode {b.mode}\n")
        lines.append(f"index {old_id}..{new_id}\n")
    elif b is None and a is not None:
        lines.append(f"deleted file mode {a.mode}\n")
        lines.append(f"index {old_id}..{new_id}\n")
    elif a is not None and b is not None:
        if a.mode != b.mode:
            lines.append(f"old mode {a.mode}\nnew mode {b.mode}\n")
            if not same_data:
                lines.append(f"index {old_id}..{new_id}\n")
        else:
            lines.append(f"index {old_id}..{new_id} {a.mode}\n")
    if same_data or (not old_data and not new_data):
        return "".join(lines)
    if b"\0" in old_data[:BINARY_PROBE] or b"\0" in new_data[:BINARY_PROBE]:
        left = old_name if a is not None else "/dev/null"
        right = new_name if b is not None else "/dev/null"
        lines.append(f"Binary files {left} and {right} differ\n")
        return "".join(lines)
    # git ends a ---/+++ name holding a space with a tab, so patch tools find where it ends.
    tab = "\t" if " " in rel else ""
    lines.append(f"--- {old_name + tab if a is not None else '/dev/null'}\n")
    lines.append(f"+++ {new_name + tab if b is not None else '/dev/null'}\n")
    old_lines = _LINE.findall(old_data.decode("utf-8", "replace"))
    new_lines = _LINE.findall(new_data.decode("utf-8", "replace"))
    hunks = difflib.unified_diff(old_lines, new_lines, n=3, lineterm="\n")
    # difflib's first two lines are its own ---/+++ header (empty names); ours is above.
    for number, line in enumerate(hunks):
        if number >= 2:
            lines.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(lines)
