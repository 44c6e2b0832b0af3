"""The files two trials changed, compared from their ``workspace.diff`` (runner.workspace.diff):
which file only one of them changed, which both left the same, and for a file both changed
differently, a diff of what each left in it.

A diff holds the lines around each change, not whole files: a file both changed is compared
by the lines the two diffs show of its final content (all of it for a new file), with ``⋯``
where a diff skips lines. Files both changed to the same content (the same blob id in the
``index`` line) are "the same". Django-free.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

GAP = "⋯"
# A diff of two files' contents longer than this is cut (the trials' own pages have it all).
MAX_DIFF_LINES = 400


@dataclass(frozen=True)
class FilePatch:
    """One file's part of a workspace.diff."""

    path: str
    text: str
    state: str  # "added", "deleted", "modified", "large"
    new_id: str = ""
    binary: bool = False

    def final_lines(self) -> list[str]:
        """The lines the patch shows of the file's final content, a GAP line where it skips
        some (before the first hunk when that starts past line 1, and between hunks)."""
        if self.state == "deleted":
            return []
        lines: list[str] = []
        in_hunk = False
        for line in self.text.splitlines():
            if line.startswith("@@"):
                # "@@ -old,count +new,count @@": where the hunk starts in the final file.
                new = line.split(" ")[2] if line.count(" ") >= 2 else "+1"
                start = new.lstrip("+").split(",")[0]
                if lines or (start.isdigit() and int(start) > 1):
                    lines.append(GAP)
                in_hunk = True
            elif in_hunk and line[:1] in (" ", "+"):
                lines.append(line[1:])
        return lines


@dataclass(frozen=True)
class FileComparison:
    path: str
    state: str  # "only_a", "only_b", "same", "different"
    a: FilePatch | None
    b: FilePatch | None
    diff: str = ""  # for "different": A's final lines against B's, unified


def parse(diff_text: str) -> dict[str, FilePatch]:
    """A workspace.diff's files by path, in the diff's order."""
    patches: dict[str, FilePatch] = {}
    sections: list[list[str]] = []
    for line in diff_text.splitlines(keepends=True):
        if line.startswith("diff --git "):
            sections.append([line])
        elif line.startswith("large file changed: "):
            path = line[len("large file changed: ") :].rstrip("\n")
            patches[path] = FilePatch(path, line, "large")
        elif sections:
            sections[-1].append(line)
    for section in sections:
        header = section[0][len("diff --git ") :].rstrip("\n")
        # "a/<path> b/<path>", the same path twice (git quotes one with odd characters).
        quoted = header.startswith('"')
        name = header[: (len(header) - 1) // 2]
        path = name[3:-1] if quoted else name[2:]
        state, new_id, binary = "modified", "", False
        for line in section[1:]:
            if line.startswith("new file mode"):
                state = "added"
            elif line.startswith("deleted file mode"):
                state = "deleted"
            elif line.startswith("Binary files"):
                binary = True
            elif line.startswith("index "):
                new_id = line.split()[1].split("..")[-1]
            elif line.startswith("@@"):
                break
        patches[path] = FilePatch(path, "".join(section), state, new_id, binary)
    return patches


def compare(diff_a: str, diff_b: str) -> list[FileComparison]:
    """Every file either trial changed, the differing ones first, then by path."""
    a, b = parse(diff_a), parse(diff_b)
    found = []
    for path in sorted(a.keys() | b.keys()):
        pa, pb = a.get(path), b.get(path)
        if pb is None:
            found.append(FileComparison(path, "only_a", pa, None))
        elif pa is None:
            found.append(FileComparison(path, "only_b", None, pb))
        elif _same(pa, pb):
            found.append(FileComparison(path, "same", pa, pb))
        else:
            found.append(FileComparison(path, "different", pa, pb, _content_diff(pa, pb)))
    order = {"different": 0, "only_a": 1, "only_b": 1, "same": 2}
    return sorted(found, key=lambda c: order[c.state])


def _same(a: FilePatch, b: FilePatch) -> bool:
    # A file over the diff's size limit is only named: two of them cannot be told apart.
    if a.state != b.state or a.state == "large":
        return False
    if a.new_id and b.new_id:
        return a.new_id == b.new_id
    return a.text == b.text


def _content_diff(a: FilePatch, b: FilePatch) -> str:
    if a.binary or b.binary or "large" in (a.state, b.state):
        return ""
    lines = list(
        difflib.unified_diff(
            a.final_lines(),
            b.final_lines(),
            f"A/{a.path}" if a.state != "deleted" else "/dev/null",
            f"B/{b.path}" if b.state != "deleted" else "/dev/null",
            lineterm="",
        )
    )
    if len(lines) > MAX_DIFF_LINES:
        left = len(lines) - MAX_DIFF_LINES
        lines = [*lines[:MAX_DIFF_LINES], f"{GAP} {left} more lines (see each trial's page)"]
    return "\n".join(lines) + "\n" if lines else ""
