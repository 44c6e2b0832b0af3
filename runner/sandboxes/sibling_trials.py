"""Trials that run in the sibling worker processes of one `proctor eval`, as the write audit
needs to know them.

The local sandbox's write audit cannot tell whose agent wrote a file outside its workspace
(``runner.sandboxes.audit``). A trial whose agent ran beside others says so in its record, and
the others' secrets are redacted from the paths it lists, as they may be the others' writes.
Within one process ``ConcurrentTrials`` knows its trials; a trial in a worker process also
learns of the trials its siblings ran meanwhile from this board, which the parent makes before
it forks them and so shares with all of them:

- a slot per worker in anonymous shared memory: its pid and how many trials it has started and
  ended. Only the worker writes its slot, so there is nothing to lock: an agent's run counts,
  for each sibling, the trial it was running when the agent started and every trial it
  started before the agent ended;
- the secrets of the siblings' trials: each trial appends its secrets (a JSON line) to one
  in-memory file (``memfd``, never on a disk) when its agent starts and again when the trial
  ends. A trial that saw siblings redacts every secret there, whichever sibling trial it came
  from: hiding a value that is some trial's secret can only hide more.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import mmap
import multiprocessing
import os
import struct
from collections.abc import Iterable

# A worker's pid, then how many trials it started and ended.
_SLOT = struct.Struct("=qqq")


class SiblingBoard:
    """Made by the parent before the fork; each worker then calls ``join`` once."""

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._slots = mmap.mmap(-1, _SLOT.size * workers)  # anonymous: shared after a fork
        self._joining = multiprocessing.get_context("fork").Lock()
        self._secrets = os.memfd_create("proctor-sibling-secrets", os.MFD_CLOEXEC)
        flags = fcntl.fcntl(self._secrets, fcntl.F_GETFL)
        fcntl.fcntl(self._secrets, fcntl.F_SETFL, flags | os.O_APPEND)
        self._mine: int | None = None
        self._published: set[str] = set()

    def join(self) -> None:
        """Take this worker's slot (the first one free)."""
        with self._joining:
            for slot in range(self._workers):
                pid, _, _ = _SLOT.unpack_from(self._slots, slot * _SLOT.size)
                if pid == 0:
                    _SLOT.pack_into(self._slots, slot * _SLOT.size, os.getpid(), 0, 0)
                    self._mine = slot
                    return

    def close(self) -> None:
        """The parent's copies, once the workers are gone."""
        with contextlib.suppress(OSError):
            os.close(self._secrets)
        self._slots.close()

    def _counts(self) -> dict[int, tuple[int, int]]:
        """Each sibling slot's (started, ended)."""
        counts = {}
        for slot in range(self._workers):
            if slot != self._mine:
                pid, started, ended = _SLOT.unpack_from(self._slots, slot * _SLOT.size)
                if pid:
                    counts[slot] = (started, ended)
        return counts

    def _bump(self, field: int) -> None:
        if self._mine is None:
            return
        offset = self._mine * _SLOT.size
        values = list(_SLOT.unpack_from(self._slots, offset))
        values[field] += 1
        _SLOT.pack_into(self._slots, offset, *values)

    def trial_started(self) -> None:
        self._bump(1)

    def trial_ended(self, secrets: Iterable[str]) -> None:
        self.publish(secrets)
        self._bump(2)

    def publish(self, secrets: Iterable[str]) -> None:
        """Add this trial's secrets not published yet to what siblings redact."""
        new = sorted(set(secrets) - self._published)
        if new:
            os.write(self._secrets, (json.dumps(new) + "\n").encode())
            self._published.update(new)

    def begin_watch(self) -> dict[int, tuple[int, int]]:
        """What the siblings are doing as an agent starts (give it back to ``seen_since``)."""
        return self._counts()

    def seen_since(self, begun: dict[int, tuple[int, int]]) -> int:
        """How many sibling trials ran at some moment since ``begin_watch``."""
        seen = 0
        for slot, (started, _) in self._counts().items():
            was_started, was_ended = begun.get(slot, (0, 0))
            seen += int(was_started > was_ended) + (started - was_started)
        return seen

    def secrets(self) -> list[str]:
        """Every secret a sibling trial (or this one) published."""
        size = os.fstat(self._secrets).st_size
        text = os.pread(self._secrets, size, 0).decode() if size else ""
        return [secret for line in text.splitlines() if line for secret in json.loads(line)]


# The board of this worker process; None outside a pool of worker processes.
board: SiblingBoard | None = None
