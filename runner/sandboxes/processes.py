"""Running one host process in its own process group, streaming its output, with a deadline."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO

from runner.sandboxes.base import LineSink, ProcessResult

# After SIGTERM, how long the group gets to exit before SIGKILL.
TERMINATE_GRACE_S = 2.0
# Output kept in memory per stream; the rest is streamed to the sink only.
MAX_KEPT_CHARS = 2_000_000


def _pump(stream: IO[bytes], name: str, kept: list[str], on_line: LineSink | None) -> None:
    size = 0
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        if size < MAX_KEPT_CHARS:
            kept.append(line)
            size += len(line)
        if on_line is not None:
            on_line(name, line.rstrip("\n"))
    stream.close()


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def run_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str,
    timeout_s: float | None,
    on_line: LineSink | None,
) -> ProcessResult:
    """Run ``argv`` in a new session; on timeout, and after it exits, kill its whole group.

    Killing the group after a normal exit too means a backgrounded child (a dev server the agent
    started) cannot hold the output pipes open or outlive the step that started it.
    """
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return ProcessResult(
            exit_code=127,
            stdout="",
            stderr=f"could not start {argv[0]}: {exc.strerror}\n",
            timed_out=False,
            duration_ms=0,
        )
    out: list[str] = []
    err: list[str] = []
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, "stdout", out, on_line), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, "stderr", err, on_line), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=TERMINATE_GRACE_S)
    _kill_group(proc.pid, signal.SIGKILL)
    proc.wait()
    for pump in pumps:
        pump.join(timeout=5)
    return ProcessResult(
        exit_code=None if timed_out else proc.returncode,
        stdout="".join(out),
        stderr="".join(err),
        timed_out=timed_out,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
