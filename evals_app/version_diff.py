"""What changed between two versions of a case, in words a reader scans in a second.

``describe_changes`` compares two ``CaseVersion.definition`` dicts field by field and names
each difference ("prompt changed", "limits.timeout_ms: 900000 -> 1800000", "check added:
pytest -q"); ``unified_source_diff`` shows the captured source files line by line. Both are
pure functions of the JSON, so the case history page, the admin and the API say the same.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

# Top-level keys in the order a reader cares about them; the case's own identity comes first
# because a moved case is the most surprising change.
_FIELD_ORDER = (
    "suite",
    "case",
    "prompt",
    "system_prompt",
    "source",
    "prepare",
    "cache",
    "limits",
    "conversation",
    "checks",
)

# A scalar longer than this is named as changed rather than quoted in full.
_QUOTABLE_LENGTH = 60


def describe_changes(old: dict | None, new: dict) -> list[str]:
    """One short sentence per difference from ``old`` to ``new``; ``["first version"]`` when
    there is no previous version, an empty list when the two are equal."""
    if old is None:
        return ["first version"]
    changes: list[str] = []
    extra_keys = sorted((set(old) | set(new)) - set(_FIELD_ORDER))
    for key in (*_FIELD_ORDER, *extra_keys):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        describe = _FIELD_DESCRIBERS.get(key, _describe_value)
        changes.extend(describe(key, before, after))
    return changes


def unified_source_diff(old_sources: dict, new_sources: dict) -> str:
    """A unified diff of every captured file (path -> text) that differs; "" when none does.

    A file present on one side only diffs against /dev/null, as git shows it.
    """
    chunks: list[str] = []
    for path in sorted(set(old_sources) | set(new_sources)):
        before, after = old_sources.get(path), new_sources.get(path)
        if before == after:
            continue
        lines = difflib.unified_diff(
            _lines(before),
            _lines(after),
            fromfile=f"a/{path}" if before is not None else "/dev/null",
            tofile=f"b/{path}" if after is not None else "/dev/null",
        )
        chunks.append("".join(lines))
    return "".join(chunks)


def _lines(text: str | None) -> list[str]:
    """Lines that each end in a newline, so the last line of a file does not run into the
    next header of the diff."""
    if text is None:
        return []
    return [line if line.endswith("\n") else line + "\n" for line in text.splitlines(keepends=True)]


def _quotable(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) <= _QUOTABLE_LENGTH and "\n" not in value
    return value is None or isinstance(value, bool | int | float)


def _show(value: Any) -> str:
    # JSON spelling: null, true, "main", 900000, the way the definition itself reads.
    return json.dumps(value, ensure_ascii=False)


def _describe_value(label: str, before: Any, after: Any) -> list[str]:
    """Any field: added, removed, old -> new for short scalars, each key for dicts, else changed."""
    if before is None:
        return [f"{label} added" if not _quotable(after) else f"{label}: null -> {_show(after)}"]
    if after is None:
        return [
            f"{label} removed" if not _quotable(before) else f"{label}: {_show(before)} -> null"
        ]
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[str] = []
        for key in _keys_in_order(before, after):
            if before.get(key) != after.get(key):
                changes.extend(_describe_value(f"{label}.{key}", before.get(key), after.get(key)))
        return changes
    if _quotable(before) and _quotable(after):
        return [f"{label}: {_show(before)} -> {_show(after)}"]
    return [f"{label} changed"]


def _keys_in_order(before: dict, after: dict) -> list[str]:
    """The keys of both dicts, the old one's order first, then keys only the new one has."""
    return [*before, *(key for key in after if key not in before)]


def _describe_text(label: str, before: Any, after: Any) -> list[str]:
    """Prompts are long: only whether one was added, removed or changed."""
    if not before:
        return [f"{label} added"]
    if not after:
        return [f"{label} removed"]
    return [f"{label} changed"]


def _describe_prompt(key: str, before: Any, after: Any) -> list[str]:
    return _describe_text("prompt", before, after)


def _describe_system_prompt(key: str, before: Any, after: Any) -> list[str]:
    return _describe_text("system prompt", before, after)


def _describe_source(key: str, before: Any, after: Any) -> list[str]:
    before, after = before or {"kind": "empty"}, after or {"kind": "empty"}
    if before.get("kind") != after.get("kind"):
        return [f"source: {before.get('kind')} -> {after.get('kind')}"]
    if after.get("kind") == "files":
        return _describe_files(before.get("files") or {}, after.get("files") or {})
    return _describe_value("source", before, after)


def _describe_files(before: dict, after: dict) -> list[str]:
    added = [path for path in sorted(after) if path not in before]
    removed = [path for path in sorted(before) if path not in after]
    changed = [path for path in sorted(after) if path in before and before[path] != after[path]]
    changes = [f"source file added: {path}" for path in added]
    changes += [f"source file removed: {path}" for path in removed]
    changes += [f"source file changed: {path}" for path in changed]
    return changes


def _describe_callable(label: str, before: dict | None, after: dict | None) -> list[str]:
    """A captured callable (prepare, a validator): its code, its name, or where it lives."""
    if not before:
        return [f"{label} added"]
    if not after:
        return [f"{label} removed"]
    changes: list[str] = []
    if before.get("qualname") != after.get("qualname"):
        changes.append(f"{label}: {before.get('qualname')} -> {after.get('qualname')}")
    if before.get("sha256") != after.get("sha256"):
        changes.append(f"{label}: source changed")
    if before.get("path") != after.get("path"):
        changes.append(f"{label}: moved to {after.get('path')}")
    elif (before.get("start"), before.get("end")) != (after.get("start"), after.get("end")):
        # Same code at other lines: an edit elsewhere in the file shifted it.
        changes.append(f"{label}: now at lines {after.get('start')}-{after.get('end')}")
    changes.extend(_describe_reads(label, before.get("reads") or {}, after.get("reads") or {}))
    seen = {"qualname", "sha256", "path", "start", "end", "reads"}
    for key in _keys_in_order(before, after):
        if key not in seen and before.get(key) != after.get(key):
            changes.extend(_describe_value(f"{label}.{key}", before.get(key), after.get(key)))
    return changes


def _describe_reads(label: str, before: dict, after: dict) -> list[str]:
    """The names a callable reads whose values changed: a number's or a boolean's values are
    shown, anything else (text is kept as a digest) only named."""
    changes = []
    for name in _keys_in_order(before, after):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        if name not in before:
            changes.append(f"{label}: now reads {name}")
        elif name not in after:
            changes.append(f"{label}: no longer reads {name}")
        elif _is_number(old) and _is_number(new):
            changes.append(f"{label}: {name} {_show(old)} -> {_show(new)}")
        else:
            changes.append(f"{label}: {name} changed")
    return changes


def _is_number(value: Any) -> bool:
    return isinstance(value, bool | int | float)


def _describe_prepare(key: str, before: Any, after: Any) -> list[str]:
    return _describe_callable("prepare", before, after)


def _describe_checks(key: str, before: Any, after: Any) -> list[str]:
    """Checks are matched by name: added, removed, changed in place, or only reordered."""
    old_checks = {check.get("name"): check for check in before or []}
    new_checks = {check.get("name"): check for check in after or []}
    changes = [f"check removed: {name}" for name in old_checks if name not in new_checks]
    for name, new_check in new_checks.items():
        old_check = old_checks.get(name)
        if old_check is None:
            changes.append(f"check added: {name}")
        elif old_check != new_check:
            changes.extend(_describe_check(name, old_check, new_check))
    common_old = [name for name in old_checks if name in new_checks]
    common_new = [name for name in new_checks if name in old_checks]
    if common_old != common_new:
        changes.append("checks reordered")
    return changes


def _describe_check(name: str, before: dict, after: dict) -> list[str]:
    label = f"check {name}"
    if before.get("kind") != after.get("kind"):
        return [f"{label}: {before.get('kind')} -> {after.get('kind')}"]
    if after.get("kind") == "validator":
        return _describe_callable(label, before, after)
    if after.get("kind") == "command" and before.get("command") != after.get("command"):
        # A command check's source is its command text.
        rest_before = {k: v for k, v in before.items() if k != "command"}
        rest_after = {k: v for k, v in after.items() if k != "command"}
        return [f"{label}: command changed", *_describe_value(label, rest_before, rest_after)]
    return _describe_value(label, before, after)


def _describe_case_identity(key: str, before: Any, after: Any) -> list[str]:
    return [f"{key}: {before} -> {after}"]


_FIELD_DESCRIBERS = {
    "suite": _describe_case_identity,
    "case": _describe_case_identity,
    "prompt": _describe_prompt,
    "system_prompt": _describe_system_prompt,
    "source": _describe_source,
    "prepare": _describe_prepare,
    "checks": _describe_checks,
}
