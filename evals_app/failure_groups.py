"""A batch's failed and errored trials grouped by cause (issue 32): 40 failures that are 30 of
one kind and 10 of another read as two lines, not 40 trial pages.

A failed trial's cause is its first failing check (by the check's order in the trial): its
name and message. An errored trial's cause is its error (a traceback's last line, where the
exception is named). Two trials share a group when their status, check name and *signature*
agree: the message with what differs from trial to trial taken out (paths, UUIDs and other
ids, hex digests and addresses, numbers). The group shows the first trial's own message, so
"expected 200, got 500" reads as written.

``failure_groups`` reads a few queries per CHUNK failed trials, whatever the batch's size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from evals_app.models import Batch, Check, Trial

# The statuses grouped: a check failed, or the infrastructure broke.
GROUPED_STATUSES = (Trial.Status.FAILED, Trial.Status.ERRORED)
CHUNK = 500
# A message is cut to this many characters (its first line) before it is shown or compared.
MESSAGE_MAX = 300

# Taken out of a message in this order (a UUID before its hex parts, a path before its numbers).
_VARYING = (
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<id>"),
    # An absolute, home or relative path with at least one separator.
    (re.compile(r"(?:~|\.{1,2})?/[^\s'\"`()\[\]{},;:]+|\b[\w.-]+(?:/[\w.-]+)+"), "<path>"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "<hex>"),
    # A run of hex long enough to be a digest or commit, with a digit in it (not a plain word).
    (re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{7,}\b", re.I), "<hex>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
)
_SPACE = re.compile(r"\s+")


def message_signature(message: str) -> str:
    """``message`` with paths, ids, hex and numbers replaced by placeholders and its spaces
    collapsed: what two trials failing for one reason have in common."""
    text = first_line(message)
    for pattern, placeholder in _VARYING:
        text = pattern.sub(placeholder, text)
    return _SPACE.sub(" ", text).strip()


def first_line(message: str) -> str:
    """The line of ``message`` that names the cause: its first non-empty line, or the last one
    of a Python traceback (where the exception and its message are), cut to MESSAGE_MAX."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1] if lines[0].startswith("Traceback (most recent call last)") else lines[0]
    return line[:MESSAGE_MAX]


@dataclass
class FailureGroup:
    """Trials that failed (or errored) for one cause, in the order they were run."""

    status: str  # "failed" or "errored"
    check: str  # the first failing check's name ("" for an errored trial)
    signature: str
    message: str  # the first trial's own message, as it reads
    trial_ids: list[int] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.trial_ids)

    @property
    def cause(self) -> str:
        """The cause in one line: "AssertionError: expected 200, got 500 in check health"."""
        message = self.message or ("no message" if self.check else "no error recorded")
        return f"{message} in check {self.check}" if self.check else message

    @property
    def headline(self) -> str:
        """What `proctor eval` prints: "30 failed: <cause>"."""
        return f"{self.count} {self.status}: {self.cause}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "count": self.count,
            "check": self.check or None,
            "signature": self.signature,
            "message": self.message,
            "cause": self.cause,
            "trial_ids": self.trial_ids,
        }


def failure_groups(batch: Batch) -> list[FailureGroup]:
    """The failed and errored trials of ``batch`` grouped by cause, the largest group first
    (then failed before errored, then by cause). A few queries per CHUNK such trials."""
    trials = (
        Trial.objects.filter(run__batch=batch, status__in=GROUPED_STATUSES)
        .order_by("run_id", "index")
        .values_list("id", "status", "error", "finish_reason")
    )
    groups: dict[tuple[str, str, str], FailureGroup] = {}
    chunk: list[tuple[int, str, str, str]] = []
    for row in trials.iterator(chunk_size=CHUNK):
        chunk.append(row)
        if len(chunk) == CHUNK:
            _group_chunk(groups, chunk)
            chunk = []
    _group_chunk(groups, chunk)
    return sorted(
        groups.values(),
        key=lambda g: (-g.count, GROUPED_STATUSES.index(Trial.Status(g.status)), g.cause),
    )


def _group_chunk(
    groups: dict[tuple[str, str, str], FailureGroup], trials: list[tuple[int, str, str, str]]
) -> None:
    if not trials:
        return
    failing: dict[int, tuple[str, str]] = {}
    failed_ids = [trial_id for trial_id, status, _, _ in trials if status == Trial.Status.FAILED]
    for trial_id, name, message in (
        Check.objects.filter(trial_id__in=failed_ids, passed=False)
        .order_by("trial_id", "index")
        .values_list("trial_id", "name", "message")
    ):
        failing.setdefault(trial_id, (name, message))
    for trial_id, status, error, finish_reason in trials:
        if status == Trial.Status.FAILED and trial_id in failing:
            check, message = failing[trial_id]
        else:
            # Errored, or failed with no failing check (a conversation cut short): its error.
            check, message = "", error or finish_reason
        key = (status, check, message_signature(message))
        group = groups.get(key)
        if group is None:
            group = groups[key] = FailureGroup(
                status=status, check=check, signature=key[2], message=first_line(message)
            )
        group.trial_ids.append(trial_id)
