"""Reading the shell recorder's trace log into Command events, and removing it between turns.

The log lives in the agent's home, so the agent can put anything in its place: a link (to a file
of the host's), a FIFO (whose opening for reading waits for a writer that never comes: the trial
hung there for good), a folder. Only a regular file is read, opened without following a link or
waiting; whatever is there is then removed, never followed.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
from pathlib import Path

from proctor.agent_events import AgentEvent

RECORDER_SCRIPT = Path(__file__).with_name("shell_recorder.sh")


@functools.cache
def recorder_script() -> bytes:
    """The recorder's text, read once per process: every trial writes it into its sandbox's
    home, and writing known bytes costs half of what copying the file does."""
    return RECORDER_SCRIPT.read_bytes()


def read_trace(path: Path, *, already_printed: set[str]) -> list[AgentEvent]:
    """Commands the shell recorder saw, minus those the agent printed itself with the same text;
    the log is removed once read.

    Each becomes a Command with a null exit code, stamped with the time the trap fired.
    """
    data = _read_plain_file(path)
    remove_trace(path)
    events = []
    for record in data.split(b"\0"):
        if not record.strip():
            continue
        stamp, _, command = record.decode("utf-8", errors="replace").partition("\t")
        if not command or command in already_printed:
            continue
        try:
            at_ms = int(float(stamp) * 1000) or None
        except ValueError:
            at_ms = None
        data_ = {"command": command, "exit_code": None, "output": "", "origin": "trace"}
        events.append(
            AgentEvent("Command", data_, at_ms) if at_ms else AgentEvent("Command", data_)
        )
    return events


def remove_trace(path: Path) -> None:
    """Remove the log, or whatever the agent left in its place, so the next turn records only
    the commands it ran."""
    try:
        path.unlink(missing_ok=True)
    except IsADirectoryError:
        shutil.rmtree(path, ignore_errors=True)


def _read_plain_file(path: Path) -> bytes:
    """The bytes of ``path`` if it is a regular file (a link is not followed, a FIFO not
    waited on); nothing otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # missing, a link, or not for this process to open
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        with open(fd, "rb", closefd=False) as log:
            return log.read()
    finally:
        os.close(fd)
