"""Reading the shell recorder's trace log into Command events."""

from __future__ import annotations

import functools
from pathlib import Path

from proctor.agent_events import AgentEvent

RECORDER_SCRIPT = Path(__file__).with_name("shell_recorder.sh")


@functools.cache
def recorder_script() -> bytes:
    """The recorder's text, read once per process: every trial writes it into its sandbox's
    home, and writing known bytes costs half of what copying the file does."""
    return RECORDER_SCRIPT.read_bytes()


def read_trace(path: Path, *, already_printed: set[str]) -> list[AgentEvent]:
    """Commands the shell recorder saw, minus those the agent printed itself with the same text.

    Each becomes a Command with a null exit code, stamped with the time the trap fired.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
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
